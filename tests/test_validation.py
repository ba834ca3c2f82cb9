"""Every bad input named in the core issue gets a clear error naming argument, rule and value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hetsched as hs

TYPES = ["v100", "k80"]


def cluster() -> hs.Cluster:
    return hs.Cluster({"v100": 4, "k80": 4})


@pytest.mark.parametrize("bad, text", [(np.nan, "finite"), (np.inf, "finite"), (-1.0, "non-negative")])
def test_bad_throughput_values(bad: float, text: str) -> None:
    with pytest.raises(hs.ValidationError, match=rf"`throughputs` must be {text}; row 1, column 0"):
        hs.JobSet([[1.0, 1.0], [bad, 1.0]], gpu_types=TYPES)


def test_zero_throughput_on_every_present_type() -> None:
    c = hs.Cluster({"v100": 4, "k80": 0})
    jobs = hs.JobSet([[1.0, 1.0], [0.0, 5.0]], gpu_types=TYPES, ids=["a", "b"])
    with pytest.raises(hs.ValidationError, match=r"job 'b' has zero throughput on every GPU type the cluster has \(\['v100'\]\)"):
        hs.solve("max_min_fairness", jobs, c)


def test_shape_mismatch() -> None:
    with pytest.raises(hs.ValidationError, match=r"must have shape \(n_jobs, n_gpu_types\) = \(n, 2\); got \(2, 3\)"):
        hs.JobSet(np.ones((2, 3)), gpu_types=TYPES)


def test_gpu_types_required_and_unique() -> None:
    with pytest.raises(hs.ValidationError, match="`gpu_types` is required"):
        hs.JobSet(np.ones((2, 2)))
    with pytest.raises(hs.ValidationError, match=r"must be unique; \['a'\]"):
        hs.JobSet(np.ones((2, 2)), gpu_types=["a", "a"])


def test_duplicate_ids() -> None:
    with pytest.raises(hs.ValidationError, match=r"`ids` must be unique; duplicated ids: \['x'\]"):
        hs.JobSet(np.ones((3, 2)), gpu_types=TYPES, ids=["x", "y", "x"])


@pytest.mark.parametrize("bad", [0, -2, 1.5, np.nan])
def test_bad_scale_factors(bad: float) -> None:
    with pytest.raises(hs.ValidationError, match=r"`scale_factors` must be positive integers; job 1 has"):
        hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, scale_factors=[1, bad])


def test_scale_factor_larger_than_every_type() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, scale_factors=[1, 8], ids=["a", "j7"])
    with pytest.raises(hs.ValidationError, match=r"job 'j7' asks for 8 GPUs but the largest GPU type it can run on \('v100'\) has 4"):
        hs.solve("max_min_fairness", jobs, cluster())


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf])
def test_bad_weights(bad: float) -> None:
    with pytest.raises(hs.ValidationError, match=r"`weights` must be positive; job 0 has"):
        hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, weights=[bad, 1.0])


def test_unknown_policy_lists_valid_ones() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.UnknownPolicyError, match=r"'nope' is not a known policy; choose one of \[.*'max_min_fairness'.*\]"):
        hs.solve("nope", jobs, cluster())
    with pytest.raises(hs.ValidationError, match="policy name"):
        hs.solve(42, jobs, cluster())  # type: ignore[arg-type]


def test_unknown_solver_lists_installed_ones() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.UnknownSolverError, match=r"'gurobi' is not an installed backend; choose one of \['auto', .*'highs'.*\]"):
        hs.solve("max_min_fairness", jobs, cluster(), solver="gurobi")


def test_empty_job_set_is_valid() -> None:
    jobs = hs.JobSet(np.zeros((0, 2)), gpu_types=TYPES, steps_remaining=np.zeros(0), entities=[])
    for policy in hs.list_policies():
        res = hs.solve(policy, jobs, cluster())
        assert res.status == "optimal" and res.success
        assert res.X.shape == (0, 2)
        assert res.to_frame().shape == (0, 3)


def test_empty_cluster() -> None:
    with pytest.raises(hs.ValidationError, match="at least one GPU type; got an empty mapping"):
        hs.Cluster({})
    jobs = hs.JobSet(np.ones((1, 2)), gpu_types=TYPES)
    with pytest.raises(hs.ValidationError, match=r"`cluster` has no GPUs of the job types' GPU types \['v100', 'k80'\]"):
        hs.solve("max_min_fairness", jobs, hs.Cluster({"a100": 8}))


@pytest.mark.parametrize("bad", [-1, 1.5, "4", True])
def test_bad_cluster_counts(bad: object) -> None:
    with pytest.raises(hs.ValidationError, match=r"`counts\['v100'\]` must be a non-negative integer"):
        hs.Cluster({"v100": bad})  # type: ignore[dict-item]


def test_bad_prices() -> None:
    with pytest.raises(hs.ValidationError, match=r"`prices\['v100'\]` must be a positive number; got -1"):
        hs.Cluster({"v100": 1}, prices={"v100": -1})
    with pytest.raises(hs.ValidationError, match=r"`prices` names GPU type 'a100', which is not in `counts`"):
        hs.Cluster({"v100": 1}, prices={"a100": 1.0})


def test_cost_policy_needs_prices() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.ValidationError, match=r"needs `Cluster\(prices=...\)`.*missing prices for \['v100', 'k80'\]"):
        hs.solve(hs.policies.MaxSumThroughput(normalize_by_cost=True), jobs, cluster())


@pytest.mark.parametrize("policy", ["min_makespan", "finish_time_fairness"])
def test_missing_field_names_field_and_policy(policy: str) -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.MissingFieldError, match=rf"policy '{policy}' needs job field `steps_remaining`"):
        hs.solve(policy, jobs, cluster())


def test_slos_without_steps() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, slos=[10.0, 10.0])
    with pytest.raises(hs.MissingFieldError, match="with `slos` needs job field `steps_remaining`"):
        hs.solve("max_sum_throughput", jobs, cluster())


@pytest.mark.parametrize(
    "field, bad, rule",
    [("steps_remaining", 0.0, "positive"), ("time_since_start", -1.0, "non-negative"), ("slos", -5.0, "positive"),
     ("arrival_times", np.nan, "finite"), ("isolated_time_elapsed", -0.5, "non-negative")],
)
def test_bad_optional_fields(field: str, bad: float, rule: str) -> None:
    with pytest.raises(hs.ValidationError, match=rf"`{field}` must be {rule}; job 'b' has"):
        hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, ids=["a", "b"], **{field: [1.0, bad]})


def test_field_length_mismatch() -> None:
    with pytest.raises(hs.ValidationError, match=r"`weights` must have shape \(n_jobs,\) = \(2,\); got \(3,\)"):
        hs.JobSet(np.ones((2, 2)), gpu_types=TYPES, weights=[1, 2, 3])


@pytest.mark.parametrize("bad", [0, -1.0, np.nan, "soon"])
def test_bad_time_limit(bad: object) -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.ValidationError, match="`time_limit` must be a positive number of seconds"):
        hs.solve("max_min_fairness", jobs, cluster(), time_limit=bad)  # type: ignore[arg-type]


def test_bad_highs_option_is_named() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.ValidationError, match=r"`options\['no_such_option'\]`"):
        hs.solve("max_min_fairness", jobs, cluster(), solver="highs", options={"no_such_option": 1})


def test_wrong_argument_types() -> None:
    jobs = hs.JobSet(np.ones((2, 2)), gpu_types=TYPES)
    with pytest.raises(hs.ValidationError, match="`jobs` must be a hetsched.JobSet; got ndarray"):
        hs.solve("max_min_fairness", np.ones((2, 2)), cluster())  # type: ignore[arg-type]
    with pytest.raises(hs.ValidationError, match="`cluster` must be a hetsched.Cluster; got dict"):
        hs.solve("max_min_fairness", jobs, {"v100": 4})  # type: ignore[arg-type]


def test_dataframe_columns_must_match_gpu_types() -> None:
    df = pd.DataFrame({"v100": [1.0], "k80": [2.0]})
    with pytest.raises(hs.ValidationError, match="must equal the DataFrame's columns"):
        hs.JobSet(df, gpu_types=["k80", "v100"])
