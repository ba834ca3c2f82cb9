"""Policy parameters are checked at construction; jobs that cannot run on the cluster's hosts
and magnitudes the solvers cannot handle are refused up front (ValidationError naming the
argument, the rule and the value)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import hetsched as hs
from hetsched import policies as P
from hetsched.errors import ValidationError
from hetsched.formulations.min_makespan import RATE_SPREAD_MAX
from hetsched.inputs.jobs import STEPS_MAX, THROUGHPUT_RANGE, TIME_MAX, WEIGHT_RANGE

SPACE = [P.MaxMinFairness, P.MinMakespan, P.FinishTimeFairness, P.MaxSumThroughput]
BOOLS = [
    (P.MaxMinFairness, "heterogeneity_aware"), (P.MaxMinFairness, "second_stage"),
    (P.MinMakespan, "second_stage"), (P.FinishTimeFairness, "second_stage"),
    (P.MaxSumThroughput, "normalize_by_cost"), (P.MaxSumThroughput, "use_slos"),
    (P.DominantResourceFairness, "allow_absent_users"), (P.DominantResourceFairness, "balance_users"),
    (P.GandivaFair, "allow_absent_users"), (P.GandivaFair, "split_gains"), (P.GandivaFair, "balance_users"),
    (P.Fifo, "backfill"),
]

# (policy class, keyword arguments, regex the message must match: parameter name and value)
BAD = [
    *[(cls, {name: bad}, rf"`{name}` must be True or False; got {re.escape(repr(bad))}")
      for cls, name in BOOLS for bad in ("no", None, 1)],
    *[(cls, {opt: {"a": 1}}, rf"`{opt}` must be a .*; got dict") for cls in SPACE
      for opt in ("packing", "placement_sensitivity")],
    (P.FinishTimeFairness, {"rtol": math.nan}, r"`rtol` must be a number in \[0, 1\); got nan"),
    (P.FinishTimeFairness, {"rtol": -1e-3}, r"`rtol` must be a number in \[0, 1\); got -0.001"),
    (P.FinishTimeFairness, {"rtol": "1e-7"}, r"`rtol` must be .*; got '1e-7'"),
    (P.FinishTimeFairness, {"max_steps": 0}, r"`max_steps` must be a positive integer; got 0"),
    (P.FinishTimeFairness, {"max_steps": 2.5}, r"`max_steps` must be a positive integer; got 2.5"),
    (P.FinishTimeFairness, {"max_steps": True}, r"`max_steps` must be a positive integer; got True"),
    (P.DominantResourceFairness, {"max_rounds": 0}, r"`max_rounds` must be a positive integer; got 0"),
    (P.DominantResourceFairness, {"max_rounds": False}, r"`max_rounds` must be a positive integer; got False"),
    (P.DominantResourceFairness, {"user_weights": {"A": -1}}, r"`user_weights\['A'\]` must be a positive number"),
    (P.GandivaFair, {"tickets": {"A": math.inf}}, r"`tickets\['A'\]` must be a positive number; got inf"),
    (P.AlloX, {"alpha": 1.5}, r"`alpha` must be a number in \(0, 1\]; got 1.5"),
    (P.AlloX, {"alpha": math.nan}, r"`alpha` must be a number in \(0, 1\]; got nan"),
    (P.AlloX, {"horizon": -1.0}, r"`horizon` must be a positive number of seconds or None; got -1.0"),
    (P.AlloX, {"horizon": math.inf}, r"`horizon` must be a positive number of seconds or None; got inf"),
    (P.AlloX, {"pinned": ["a"]}, r"`pinned` must be a mapping"),
    (P.Sia, {"fairness_power": math.nan}, r"`fairness_power` must be a finite number; got nan"),
    (P.Sia, {"lambda_unallocated": -1.0}, r"`lambda_unallocated` must be a finite number >= 0; got -1.0"),
    (P.Sia, {"max_gpus_per_job": 2.0}, r"`max_gpus_per_job` must be a positive integer or None; got 2.0"),
    (P.Sia, {"intra_node_overhead": math.inf}, r"`intra_node_overhead` must be a finite number >= 0; got inf"),
    (P.Sia, {"inter_node_overhead": -0.1}, r"`inter_node_overhead` must be a finite number >= 0; got -0.1"),
    (P.Sia, {"noise_scale_ratio": math.nan}, r"`noise_scale_ratio` must be a positive number .*; got nan"),
    (P.Sia, {"mip_gap": "small"}, r"`mip_gap` must be a finite number >= 0; got 'small'"),
    (P.Sia, {"column_reduction": "yes"}, r"`column_reduction` must be True, False or None; got 'yes'"),
    (P.Sia, {"restart_penalty": -0.1}, r"`restart_penalty` must be in \[0, 1\); entry 0 is -0.1"),
    (P.Sia, {"restart_penalty": "high"}, r"`restart_penalty` must be a number in \[0, 1\) .*; got 'high'"),
    (P.Sia, {"restart_penalty": [0.1, 1.0]}, r"`restart_penalty` must be in \[0, 1\); entry 1 is 1.0"),
    (P.Sia, {"gpus_per_node": 0}, r"`gpus_per_node` must be a positive integer.*; got 0"),
    (P.Sia, {"gpus_per_node": {"a": 4.0}}, r"`gpus_per_node\['a'\]` must be a positive integer; got 4.0"),
    (P.Sia, {"type_speedups": "fast"}, r"`type_speedups` must be None, 'learned' or a mapping.*; got 'fast'"),
    (P.Sia, {"type_speedups": {"a": 0.0}}, r"`type_speedups\['a'\]` must be a positive number; got 0.0"),
    (P.Sia, {"goodput": np.ones((2, 2))}, r"`goodput` must be a pandas DataFrame"),
    (P.Sia, {"current": [("a", 1)]}, r"`current` must be a mapping"),
]


@pytest.mark.parametrize(("cls", "kwargs", "match"), BAD, ids=lambda v: getattr(v, "__name__", None))
def test_bad_parameter_is_refused_at_construction(cls, kwargs, match) -> None:
    with pytest.raises(ValidationError, match=match):
        cls(**kwargs)


def test_every_policy_parameter_has_a_bad_case() -> None:
    """Each parameter of each policy owned here appears in the table above."""
    import dataclasses

    covered = {(cls, name) for cls, kwargs, _ in BAD for name in kwargs}
    for cls in {c for c, _, _ in BAD}:
        for f in dataclasses.fields(cls):
            assert (cls, f.name) in covered, f"{cls.__name__}.{f.name} has no bad-value case"


# (policy, valid keyword arguments including numpy scalars)
GOOD = [
    (P.MaxMinFairness, {"heterogeneity_aware": np.bool_(False), "second_stage": np.bool_(True)}),
    (P.MinMakespan, {"second_stage": np.False_}),
    (P.FinishTimeFairness, {"rtol": np.float32(1e-6), "max_steps": np.int64(40), "second_stage": False}),
    (P.FinishTimeFairness, {"rtol": 0, "max_steps": 80}),
    (P.MaxSumThroughput, {"use_slos": np.bool_(False), "normalize_by_cost": False}),
    (P.DominantResourceFairness, {"max_rounds": np.int32(50), "balance_users": np.bool_(False)}),
    (P.GandivaFair, {"split_gains": np.bool_(False), "allow_absent_users": True}),
    (P.AlloX, {"alpha": np.float64(0.5), "horizon": np.int64(1000)}),
    (P.Sia, {"max_gpus_per_job": np.int64(4), "mip_gap": 0, "column_reduction": np.bool_(False),
             "restart_penalty": np.float64(0.1), "gpus_per_node": np.int64(2), "type_speedups": "learned",
             "noise_scale_ratio": math.inf, "lambda_unallocated": np.float32(1.1)}),
    (P.Sia, {"restart_penalty": [0.0, 0.5], "gpus_per_node": {"v100": 2, "k80": 2},
             "type_speedups": {"v100": 2.0, "k80": 1}}),
]


@pytest.mark.parametrize(("cls", "kwargs"), GOOD, ids=lambda v: getattr(v, "__name__", None))
def test_valid_parameters_construct_and_solve(cls, kwargs) -> None:
    jobs = hs.JobSet([[2.0, 1.0], [1.0, 1.0]], gpu_types=["v100", "k80"], ids=["a", "b"],
                     steps_remaining=[100.0, 200.0], entities=["u", "v"])
    res = hs.solve(cls(**kwargs), jobs, hs.Cluster({"v100": 2, "k80": 2}))
    assert res.success, res.message
    assert np.isfinite(res.X).all()


def test_string_flag_no_longer_runs_a_second_stage() -> None:
    """The reported defect: `second_stage="no"` used to be truthy and run two stages."""
    with pytest.raises(ValidationError, match="`second_stage` must be True or False; got 'no'."):
        P.MaxMinFairness(second_stage="no")


@pytest.mark.parametrize("opt", ["packing", "placement_sensitivity"])
def test_workload_placeholder_is_still_accepted(opt) -> None:
    assert getattr(P.MaxMinFairness(**{opt: "workload"}), opt) == "workload"


# ----------------------------------------------------------------- host resources
@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput", "min_makespan", "drf", "fifo", "sia"])
@pytest.mark.parametrize(("field", "capacity"), [("cpus_per_gpu", "cpus"), ("mem_per_gpu", "memory")])
def test_job_that_fits_no_host_is_refused(policy, field, capacity) -> None:
    jobs = hs.JobSet([[1.0, 2.0], [1.0, 1.0]], gpu_types=["a", "b"], ids=["big", "ok"], scale_factors=[2, 1],
                     steps_remaining=[10.0, 10.0], entities=["u", "v"], **{field: [6.0, 1.0]})
    cluster = hs.Cluster({"a": 2, "b": 2}, **{capacity: {"a": 8.0, "b": 10.0}})
    pattern = rf"job 'big' needs `{field}` = 6.0 x 2 GPU\(s\) = 12 host `{capacity}`.*'a': 8.0, 'b': 10.0"
    with pytest.raises(ValidationError, match=pattern):
        hs.solve(policy, jobs, cluster)


def test_job_that_fits_one_host_still_runs_there() -> None:
    jobs = hs.JobSet([[1.0, 2.0]], gpu_types=["a", "b"], scale_factors=[2], cpus_per_gpu=[6.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"a": 2, "b": 2}, cpus={"a": 8.0, "b": 12.0}))
    np.testing.assert_allclose(res.X, [[0.0, 1.0]], atol=1e-9)


def test_fit_only_counts_types_the_job_can_run_on() -> None:
    """Type 'b' has the CPUs but the job has zero throughput there."""
    jobs = hs.JobSet([[1.0, 0.0]], gpu_types=["a", "b"], ids=["j"], cpus_per_gpu=[10.0])
    with pytest.raises(ValidationError, match=r"job 'j' .*\{'a': 8.0\}"):
        hs.solve("max_min_fairness", jobs, hs.Cluster({"a": 1, "b": 1}, cpus={"a": 8.0, "b": 100.0}))


# --------------------------------------------------------------------- magnitudes
@pytest.mark.parametrize(("kwargs", "match"), [
    ({"throughputs": [[1e30, 1.0]]}, r"`throughputs` must be 0 \(cannot run\) or in \[1e-06, 1e\+09\].*job 0 on 'a' has 1e\+30"),
    ({"throughputs": [[1e30, 1e-30]]}, r"`throughputs` must be .*1e\+30"),
    ({"throughputs": [[1.0, 1e-9]]}, r"`throughputs` .*job 0 on 'b' has 1e-09"),
    ({"steps_remaining": [1e300]}, r"`steps_remaining` must be at most 1e\+15.*job 0 has 1e\+300"),
    ({"time_since_start": [1e18]}, r"`time_since_start` must be at most 1e\+12.*job 0 has 1e\+18"),
    ({"isolated_time_elapsed": [1e13]}, r"`isolated_time_elapsed` must be at most 1e\+12"),
    ({"slos": [1e20]}, r"`slos` must be at most 1e\+12"),
    ({"weights": [1e-12]}, r"`weights` must be in \[1e-06, 1e\+06\].*job 0 has 1e-12"),
])
def test_extreme_magnitudes_are_refused(kwargs, match) -> None:
    T = kwargs.pop("throughputs", [[1.0, 2.0]])
    with pytest.raises(ValidationError, match=match):
        hs.JobSet(T, gpu_types=["a", "b"], **kwargs)


@pytest.mark.parametrize("policy", ["max_min_fairness", "min_makespan", "finish_time_fairness", "max_sum_throughput"])
@pytest.mark.parametrize("scale", [THROUGHPUT_RANGE[0], THROUGHPUT_RANGE[1]])
def test_range_edges_solve(policy, scale) -> None:
    """Throughputs at either end of the accepted range, with steps and SLOs at their maxima."""
    T = np.array([[1.0, 0.5], [2.0, 1.0], [0.3, 0.9]]) * scale / 2.0
    T[T > THROUGHPUT_RANGE[1]] = THROUGHPUT_RANGE[1]
    T[T < THROUGHPUT_RANGE[0]] = THROUGHPUT_RANGE[0]
    jobs = hs.JobSet(T, gpu_types=["a", "b"], steps_remaining=[STEPS_MAX] * 3, slos=[TIME_MAX] * 3,
                     time_since_start=[TIME_MAX] * 3, weights=[WEIGHT_RANGE[0], 1.0, WEIGHT_RANGE[1]])
    res = hs.solve(policy, jobs, hs.Cluster({"a": 2, "b": 2}))
    assert res.status in ("optimal", "infeasible"), res.message


def test_slo_rows_stay_well_scaled() -> None:
    """An SLO met by a 1e-16 share of a GPU (T slo / R = 1e16) used to end in SolverError."""
    jobs = hs.JobSet([[1.0, 1.0], [1.0, 1.0]], gpu_types=["a", "b"], steps_remaining=[1.0, 1e-16], slos=[1.0, 1.0])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"a": 2, "b": 3}))
    assert res.status == "optimal"
    assert res.objective == pytest.approx(2.0)


def test_slo_that_no_share_meets_is_infeasible() -> None:
    jobs = hs.JobSet([[1.0, 1.0], [1.0, 1.0]], gpu_types=["a", "b"], ids=["x", "y"], steps_remaining=[1.0, 1e12],
                     slos=[1.0, 1e-6])
    res = hs.solve("max_sum_throughput", jobs, hs.Cluster({"a": 2, "b": 3}))
    assert res.status == "infeasible" and res.extra["infeasible_jobs"] == ["y"]


def test_min_makespan_refuses_rates_too_far_apart() -> None:
    jobs = hs.JobSet([[1.0, 1.0], [1.0, 1.0]], gpu_types=["a", "b"], ids=["done", "long"],
                     steps_remaining=[1e-9, RATE_SPREAD_MAX * 10 * 1e-9])
    with pytest.raises(ValidationError, match=r"min_makespan: job 'done' would finish 1e\+14 times sooner than job 'long'"):
        hs.solve("min_makespan", jobs, hs.Cluster({"a": 2, "b": 3}))
    ok = hs.JobSet([[1.0, 1.0], [1.0, 1.0]], gpu_types=["a", "b"], steps_remaining=[1e-9, RATE_SPREAD_MAX * 1e-9])
    assert hs.solve("min_makespan", ok, hs.Cluster({"a": 2, "b": 3})).status == "optimal"


def test_every_bool_parameter_of_every_registered_policy_refuses_non_bools() -> None:
    """Policy.__post_init__ checks each field annotated ``bool``, for every registered policy
    (the hand-written BOOLS table above only lists some of them)."""
    import dataclasses

    from hetsched.formulations.base import registered_policies

    seen = 0
    for cls in registered_policies().values():
        for f in dataclasses.fields(cls):
            if f.type not in ("bool", bool):
                continue
            seen += 1
            for bad in (1, "yes", None):
                with pytest.raises(ValidationError, match=rf"`{f.name}` must be True or False; got {re.escape(repr(bad))}"):
                    cls(**{f.name: bad})
            assert getattr(cls(**{f.name: np.bool_(False)}), f.name) == False  # noqa: E712 - NumPy bools pass
    assert seen >= len(BOOLS) + 2  # the table's, hierarchical's and water filling's heterogeneity_aware
