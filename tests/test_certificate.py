"""The certificate every Allocation carries (hetsched.solvers.certificate): it passes correct results,
catches each kind of violation and a wrong objective, turns a failed check into status
"failed_certificate" (never a silent pass), and does not flag allocation spaces or Sia."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.solvers.certificate import FAILED_STATUS, Certificate, certify
from hetsched.formulations.baselines import Proportional
from hetsched.formulations.max_sum_throughput import MaxSumThroughput
from hetsched.formulations.spaces.packing import Packing
from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity

P = hs.policies
GPU = ["v100", "k80"]


def small_case():
    jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0], [3.0, 0.0]], gpu_types=GPU, ids=["a", "b", "c"],
                     steps_remaining=[100.0, 200.0, 300.0], entities=["u", "u", "v"],
                     arrival_times=[0.0, 1.0, 2.0])
    return jobs, hs.Cluster({"v100": 2, "k80": 1}, prices={"v100": 3.0, "k80": 1.0})


@pytest.mark.parametrize("policy", hs.list_policies())
def test_every_policy_is_certified(policy: str) -> None:
    jobs, cluster = small_case()
    res = hs.solve(policy, jobs, cluster)
    cert = res.certificate
    assert isinstance(cert, Certificate)
    assert res.status == "optimal" and res.success and cert.ok, cert.message
    assert {"nonnegative", "rows", "capacity", "unusable"} <= set(cert.violations)
    assert "certificate=ok" in repr(res)
    assert res.timings["certificate_s"] >= 0.0
    if policy in ("allox", "drf", "gandiva_fair", "sia"):
        assert cert.objective_check.startswith("not checked: ")
    else:
        assert cert.objective_check == "agrees"
        assert cert.objective_recomputed == pytest.approx(res.objective, rel=1e-9)


def test_cost_normalized_objective_and_hierarchical_weights() -> None:
    jobs, cluster = small_case()
    res = hs.solve(P.MaxSumThroughput(normalize_by_cost=True), jobs, cluster)
    assert res.certificate.objective_check == "agrees"
    res = hs.solve(P.HierarchicalMaxMinFairness(entity_weights={"u": 2.0, "v": 1.0}), jobs, cluster)
    assert res.certificate.objective_check == "agrees", res.certificate.message


def _cert(policy, X, jobs, cluster, objective=None, **extra):
    from hetsched.formulations.base import make_policy

    p = make_policy(policy)
    if objective is None:
        objective = p.objective_of(np.asarray(X, dtype=float), jobs, cluster)
    return certify(p.name, p.params(), np.asarray(X, dtype=float), jobs, cluster, status="optimal",
                   objective=objective, extra=extra)


def test_each_family_is_detected() -> None:
    jobs, cluster = small_case()
    good = hs.solve("max_sum_throughput", jobs, cluster).X
    assert _cert("max_sum_throughput", good, jobs, cluster).ok

    neg = good.copy(); neg[0, 1] = -1e-3
    c = _cert("max_sum_throughput", neg, jobs, cluster)
    assert not c.ok and c.failures == ["nonnegative"] and c.violations["nonnegative"] == pytest.approx(1e-3)

    over = np.array([[0.7, 0.5], [0.0, 0.0], [0.0, 0.0]])
    c = _cert("max_sum_throughput", over, jobs, cluster)
    assert "rows" in c.failures and c.violations["rows"] == pytest.approx(0.2)

    cap = np.array([[1.0, 0.0], [1.0, 0.0], [0.5, 0.0]])            # 2.5 v100 of 2
    c = _cert("max_sum_throughput", cap, jobs, cluster)
    assert c.failures == ["capacity"] and c.violations["capacity"] == pytest.approx(0.25)

    leak = np.zeros((3, 2)); leak[2, 1] = 0.1                       # T[c, k80] == 0
    c = _cert("max_sum_throughput", leak, jobs, cluster)
    assert c.failures == ["unusable"] and "unusable violated" in c.message

    c = _cert("max_sum_throughput", np.full((3, 2), np.inf), jobs, cluster, objective=1.0)
    assert not c.ok and c.failures == ["finite"]

    c = _cert("max_sum_throughput", good, jobs, cluster, objective=123.0)
    assert not c.ok and c.objective_check == "disagrees" and "objective reported 123.0" in c.message


def test_gang_that_does_not_fit_and_host_resources() -> None:
    jobs = hs.JobSet([[1.0, 1.0], [1.0, 1.0]], gpu_types=GPU, scale_factors=[2, 1], cpus_per_gpu=[4.0, 4.0])
    cluster = hs.Cluster({"v100": 2, "k80": 1}, cpus={"v100": 8.0, "k80": 2.0})
    res = hs.solve("max_min_fairness", jobs, cluster)
    assert res.certificate.ok and "cpus" in res.certificate.violations
    gang = np.array([[0.0, 0.5], [0.0, 0.0]])                       # 2 GPUs on a 1-GPU type
    assert "unusable" in _cert("max_min_fairness", gang, jobs, cluster).failures
    cpus = np.array([[1.0, 0.0], [1.0, 0.0]])                       # 8 + 4 cpus > 8 on v100; capacity 3 > 2
    c = _cert("max_min_fairness", cpus, jobs, cluster)
    assert {"cpus", "capacity"} <= set(c.failures)
    # closed forms ignore host resources: not checked there (no false flag)
    assert "cpus" not in _cert("proportional", hs.solve("proportional", jobs, cluster).X, jobs, cluster).violations


def test_slo_shortfall_is_detected() -> None:
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 100.0], slos=[200.0, 200.0])
    cluster = hs.Cluster({"v100": 1})
    res = hs.solve("max_sum_throughput", jobs, cluster)
    assert res.certificate.ok and res.certificate.violations["slo"] <= 1e-6
    c = _cert("max_sum_throughput", [[1.0], [0.0]], jobs, cluster)
    assert c.failures == ["slo"] and c.violations["slo"] == pytest.approx(0.5)


def test_closed_forms_are_compared_with_their_formula() -> None:
    jobs, cluster = small_case()
    X = hs.solve("isolated", jobs, cluster).X.copy()
    X[0, 0] *= 0.5
    assert "closed_form" in _cert("isolated", X, jobs, cluster).failures


def test_failed_certificate_sets_status_and_message(monkeypatch) -> None:
    jobs, cluster = small_case()
    monkeypatch.setattr(MaxSumThroughput, "objective_of", lambda self, X, j, c: 42.0)
    res = hs.solve("max_sum_throughput", jobs, cluster)
    assert res.status == FAILED_STATUS and not res.success
    assert res.extra["solver_status"] == "optimal"
    assert res.message.startswith("certificate failed: objective reported 42.0")
    assert "certificate=FAILED(objective)" in repr(res)


def test_oversubscribing_closed_form_fails(monkeypatch) -> None:
    jobs, cluster = small_case()
    monkeypatch.setattr(Proportional, "allocation", lambda self, j, c: np.where(j.throughputs > 0, 1.0, 0.0))
    res = hs.solve("proportional", jobs, cluster)
    assert res.status == FAILED_STATUS and not res.success
    assert "capacity violated" in res.message and "rows violated" in res.message


def test_no_solution_is_not_a_pass_in_disguise() -> None:
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 100.0], slos=[100.0, 100.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"v100": 1}))
    assert res.status == "infeasible" and res.certificate.objective_check == "no solution"
    assert "no solution to check" in res.certificate.message


def test_empty_jobset() -> None:
    res = hs.solve("max_min_fairness", hs.JobSet(np.zeros((0, 1)), gpu_types=["v100"]), hs.Cluster({"v100": 1}))
    assert res.certificate.ok and res.success


@pytest.mark.parametrize("policy", [P.MaxMinFairness, P.MaxSumThroughput, P.MinMakespan, P.FinishTimeFairness])
def test_pairs_exceeding_capacity_as_x_are_not_flagged(policy) -> None:
    """Two jobs share one V100 as a pair: X (isolated-equivalent) uses 1.5 GPUs, the rows 1."""
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], ids=["a", "b"], steps_remaining=[100.0, 100.0])
    cluster = hs.Cluster({"v100": 1})
    packing = Packing.from_job_pairs(["a"], ["b"], [[[0.75, 0.75]]], gpu_types=["v100"])
    res = hs.solve(policy(packing=packing), jobs, cluster)
    assert res.X.sum() == pytest.approx(1.5, rel=1e-6)               # more than the one GPU
    assert res.success and res.certificate.ok, res.certificate.message
    assert res.certificate.objective_check == "agrees"
    # the same X read as wall time would fail: the certificate reads the rows
    assert "capacity" in _cert(policy.name, res.X, jobs, cluster).failures
    rows = res.extra["allocation_rows"].copy()
    rows["gpus"] = rows["gpus"] * 2.0
    extra = {**res.extra, "allocation_rows": rows}
    bad = certify(res.policy, res.params, res.X, jobs, cluster, status="optimal", objective=res.objective, extra=extra)
    assert bad.failures == ["capacity"]


def test_placement_sensitivity_is_certified() -> None:
    cluster = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=4)
    jobs = hs.JobSet([[8.0], [2.0]], gpu_types=["v100"], ids=["big", "small"], scale_factors=[8, 2])
    ps = PlacementSensitivity(pd.DataFrame({"v100": [3.0, 1.0]}, index=["big", "small"]))
    res = hs.solve(P.MaxSumThroughput(placement_sensitivity=ps), jobs, cluster)
    assert res.success and res.certificate.ok, res.certificate.message


def test_sia_capacity_uses_chosen_counts() -> None:
    jobs = hs.JobSet([[4.0, 1.0], [2.0, 1.0]], gpu_types=GPU, ids=["a", "b"])
    cluster = hs.Cluster({"v100": 4, "k80": 4})
    res = hs.solve(P.Sia(gpus_per_node=4, mip_gap=0.0), jobs, cluster)
    cert = res.certificate
    assert cert.ok and "mip_gap" in cert.bounds and cert.objective_check.startswith("not checked")
    cfg = res.extra["configurations"].copy()
    cfg["gpus"] = cfg["gpus"] * 2                                    # 8 GPUs on each 4-GPU type
    bad = certify("sia", res.params, res.X, jobs, cluster, status="optimal", objective=res.objective,
                  extra={**res.extra, "configurations": cfg})
    assert bad.failures == ["capacity"]
    wrong = res.X[:, ::-1]                                          # X disagrees with the configurations
    bad = certify("sia", res.params, wrong, jobs, cluster, status="optimal", objective=res.objective, extra=res.extra)
    assert "unusable" in bad.failures


def test_bounds_are_recorded_and_checked() -> None:
    jobs, cluster = small_case()
    res = hs.solve("finish_time_fairness", jobs, cluster)
    assert "lower_bound" in res.certificate.bounds and res.certificate.violations["bound"] <= 1e-6
    res = hs.solve("max_min_fairness", jobs, cluster)
    assert "stage1_level" in res.certificate.bounds
    extra = {**res.extra, "stage1_level": res.objective * 1.5}       # a level stage 2 did not keep
    bad = certify(res.policy, res.params, res.X, jobs, cluster, status="optimal", objective=res.objective, extra=extra)
    assert bad.failures == ["bound"]


def test_certificate_is_frozen() -> None:
    jobs, cluster = small_case()
    cert = hs.solve("fifo", jobs, cluster).certificate
    with pytest.raises(dataclasses.FrozenInstanceError):
        cert.ok = False  # type: ignore[misc]
