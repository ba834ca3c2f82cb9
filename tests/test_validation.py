"""Every bad input named in the core issue gets a clear error naming argument, rule and value;
the rules of :mod:`hetsched.validation` and the trace column schema tested directly."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched import validation as V
from hetsched.inputs.traces.cells import Field, apply_schema
from hetsched.inputs.traces.load_report import LoadReport, RowChecks

TYPES = ["v100", "k80"]


def cluster() -> hs.Cluster:
    return hs.Cluster({"v100": 4, "k80": 4})


@pytest.mark.parametrize("bad, text", [(np.nan, "nan"), (np.inf, "inf"), (-1.0, "-1.0")])
def test_bad_throughput_values(bad: float, text: str) -> None:
    with pytest.raises(hs.ValidationError, match=rf"`throughputs` must be finite and non-negative; row 1, column 0 is {text}"):
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
    with pytest.raises(hs.ValidationError, match=r"`prices\['v100'\]` must be a positive finite number; got -1"):
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
    with pytest.raises(hs.ValidationError, match="`time_limit` must be a positive finite number of seconds"):
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


# ============================================================================ hetsched.validation
# The rules tested directly: what each accepts, what it refuses, and that every refusal is
# worded "`<argument>` must be <rule>; got <value>." (or "...; <position> is <value>.").

TEMPLATE = re.compile(r"^`(?P<arg>[^`]+)` must (be|have) (?P<rule>.+); (got|\S.*? (is|has)) (?P<value>.+)\.$")


def refused(call, *args, **kwargs) -> re.Match:
    """Run a rule that must refuse; return its message parsed by the template."""
    with pytest.raises(hs.ValidationError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    m = TEMPLATE.match(message)
    assert m is not None, f"not in the template: {message}"
    return m


@pytest.mark.parametrize("bad", [1, 0, "no", "True", None, np.int64(1), 1.0])
def test_check_bool_refuses_everything_but_booleans(bad) -> None:
    m = refused(V.check_bool, bad, "flag")
    assert (m["arg"], m["rule"]) == ("flag", "True or False")
    assert m["value"] == repr(bad.item() if isinstance(bad, np.generic) else bad)


def test_check_bool_accepts_python_and_numpy_booleans() -> None:
    assert V.check_bool(np.bool_(True), "flag") is True
    assert V.check_bool(False, "flag") is False
    assert V.check_bool(None, "flag", allow_none=True) is None
    assert refused(V.check_bool, "x", "flag", allow_none=True)["rule"] == "True, False or None"


@pytest.mark.parametrize("bad, low, rule", [
    (True, 1, "a positive integer"), (False, 0, "a non-negative integer"), (2.0, None, "an integer"),
    (0, 1, "a positive integer"), (-1, 0, "a non-negative integer"), (4, 5, "an integer >= 5"),
    ("3", None, "an integer"), (np.float64(3.0), 1, "a positive integer"), (None, 1, "a positive integer"),
])
def test_check_int_refusals(bad, low, rule) -> None:
    m = refused(V.check_int, bad, "k", low=low)
    assert (m["arg"], m["rule"]) == ("k", rule)


def test_check_int_accepts_numpy_integers_and_bounds() -> None:
    out = V.check_int(np.int32(7), "k", low=1, high=7)
    assert out == 7 and type(out) is int
    assert refused(V.check_int, 8, "k", low=1, high=7)["rule"] == "an integer in [1, 7]"
    assert V.check_int(None, "k", low=1, allow_none=True) is None
    assert refused(V.check_int, 0, "k", low=1, allow_none=True)["rule"] == "a positive integer or None"
    # whole floats only on request (counts read from JSON)
    assert V.check_int(8.0, "n", low=0, whole_floats=True) == 8
    assert refused(V.check_int, 8.5, "n", low=0, whole_floats=True)["value"] == "8.5"
    assert refused(V.check_int, math.inf, "n", low=0, whole_floats=True)["value"] == "inf"


@pytest.mark.parametrize("bad, shown", [(math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (True, "True"),
                                        ("1.5", "'1.5'"), (None, "None"), (np.float32("nan"), "nan"), ([1.0], "[1.0]")])
def test_check_real_refuses_nan_inf_bool_and_non_numbers(bad, shown) -> None:
    m = refused(V.check_real, bad, "x")
    assert (m["arg"], m["rule"], m["value"]) == ("x", "a finite number", shown)


def test_check_real_wording_of_ranges() -> None:
    assert refused(V.check_real, 1.0, "a", low=0.0, high=1.0, high_open=True)["rule"] == "a number in [0, 1)"
    assert refused(V.check_real, 0.0, "a", low=0.0, high=1.0, low_open=True)["rule"] == "a number in (0, 1]"
    assert refused(V.check_real, -1.0, "a", low=0.0)["rule"] == "a finite number >= 0"
    assert refused(V.check_real, 3.0, "a", high=2.0)["rule"] == "a finite number <= 2"
    assert refused(V.check_real, -1, "t", low=0.0, unit="seconds")["rule"] == "a finite number of seconds >= 0"
    assert refused(V.check_real, -1.0, "t", low=0.0, allow_inf=True)["rule"] == "a number >= 0"
    assert V.check_real(math.inf, "t", low=0.0, allow_inf=True) == math.inf
    assert refused(V.check_real, math.nan, "t", low=0.0, allow_inf=True)["value"] == "nan"
    assert V.check_real(None, "t", allow_none=True) is None


@settings(max_examples=200, deadline=None)
@given(x=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10)),
       low=st.floats(-5, 5), width=st.floats(0, 5), low_open=st.booleans(), high_open=st.booleans())
def test_check_real_accepts_exactly_the_numbers_in_range(x, low, width, low_open, high_open) -> None:
    high = low + width
    inside = math.isfinite(x) and (x > low if low_open else x >= low) and (x < high if high_open else x <= high)
    try:
        got = V.check_real(x, "x", low=low, high=high, low_open=low_open, high_open=high_open)
    except hs.ValidationError:
        assert not inside
    else:
        assert inside and got == float(x)


def test_check_positive_and_nonneg_and_probability() -> None:
    assert V.check_positive(np.float64(2.5), "r") == 2.5
    for bad in (0, -1.0, math.inf, math.nan, True):
        assert refused(V.check_positive, bad, "r", unit="seconds")["rule"] == "a positive finite number of seconds"
    assert V.check_nonneg(0, "s") == 0.0
    assert refused(V.check_nonneg, -0.5, "s")["rule"] == "a finite number >= 0"
    assert V.check_probability(1, "p") == 1.0
    m = refused(V.check_probability, 1.5, "p")
    assert (m["rule"], m["value"]) == ("a probability in [0, 1]", "1.5")


def test_check_choice_matches_type_and_value() -> None:
    assert V.check_choice("carve", "arrivals", ("carve", "wait")) == "carve"
    m = refused(V.check_choice, "queue", "arrivals", ("carve", "wait"))
    assert (m["rule"], m["value"]) == ("one of ['carve', 'wait']", "'queue'")
    assert refused(V.check_choice, True, "n", (1, 2))["value"] == "True"  # True == 1, but not a choice
    assert refused(V.check_choice, None, "mode", ["a"])["value"] == "None"


def test_check_nonempty_str_and_mapping() -> None:
    assert V.check_nonempty_str("a", "name") == "a"
    assert refused(V.check_nonempty_str, "", "name")["rule"] == "a non-empty string"
    assert refused(V.check_nonempty_str, 3, "name")["value"] == "3"
    m = refused(V.check_mapping, [1], "options")
    assert (m["rule"], m["value"]) == ("a mapping", "list")
    assert V.check_mapping(None, "options", allow_none=True) is None


def test_check_type_map() -> None:
    got = V.check_type_map({"a": 2, "b": np.int64(0)}, "counts", lambda v, n: V.check_int(v, n, low=0), what="count")
    assert got == {"a": 2, "b": 0}
    m = refused(V.check_type_map, {"a": -1}, "counts", lambda v, n: V.check_int(v, n, low=0), what="count")
    assert (m["arg"], m["rule"], m["value"]) == ("counts['a']", "a non-negative integer", "-1")
    m = refused(V.check_type_map, (("a", 1),), "counts", V.check_positive, what="count")
    assert (m["rule"], m["value"]) == ("a mapping of GPU type -> count", "tuple")
    with pytest.raises(hs.ValidationError, match=r"^`counts` keys must be non-empty strings; got 3\.$"):
        V.check_type_map({3: 1}, "counts", V.check_positive, what="count")
    with pytest.raises(hs.ValidationError, match=r"`prices` names GPU type 'x', which is not in `counts` \(\['a'\]\)"):
        V.check_type_map({"x": 1.0}, "prices", V.check_positive, what="$/GPU-hour", known=("a",))


def test_check_names() -> None:
    assert V.check_names(["a", "b"], "gpu_types") == ("a", "b")
    with pytest.raises(hs.ValidationError, match=r"`gpu_types` must be a sequence of names; got the string 'ab'"):
        V.check_names("ab", "gpu_types")
    assert refused(V.check_names, ["a", 3], "gpu_types")["value"] == "3"
    assert refused(V.check_names, [], "gpu_types")["rule"] == "a non-empty sequence of names"
    assert V.check_names([], "gpu_types", allow_empty=True) == ()
    with pytest.raises(hs.ValidationError, match=r"`gpu_types` must be unique; \['a'\] appear more than once"):
        V.check_names(["a", "b", "a"], "gpu_types")


@pytest.mark.parametrize("bad, where, shown", [
    ([[1.0, 2.0], [np.nan, 0.0]], "entry (1, 0)", "nan"), ([[1.0, -2.0], [0.0, 0.0]], "entry (0, 1)", "-2.0"),
    ([[1.0, 2.0], [0.0, np.inf]], "entry (1, 1)", "inf"),
])
def test_check_matrix_names_the_first_bad_entry(bad, where, shown) -> None:
    with pytest.raises(hs.ValidationError) as info:
        V.check_matrix(bad, "T", shape=(2, 2))
    assert str(info.value) == f"`T` must be finite and non-negative; {where} is {shown}."


def test_check_matrix_shape_type_and_labels() -> None:
    out = V.check_matrix(np.array([[1, 2]], dtype=np.int64), "T", shape=(-1, 2))
    assert out.dtype == float and out.tolist() == [[1.0, 2.0]]
    assert V.check_matrix([], "T", shape=(0, 3)).shape == (0, 3)
    with pytest.raises(hs.ValidationError, match=r"^`T` must have shape \(n, 2\); got \(2, 3\)\.$"):
        V.check_matrix(np.ones((2, 3)), "T", shape=(-1, 2), shape_text="(n, 2)")
    with pytest.raises(hs.ValidationError, match=r"^`T` must be numeric; got \[\['x'\]\]\.$"):
        V.check_matrix([["x"]], "T")
    with pytest.raises(hs.ValidationError, match=r"; job 'b' on 'k80' is -1\.0\.$"):
        V.check_matrix([[1.0, 1.0], [1.0, -1.0]], "T", where=lambda i: f"job {'ab'[i[0]]!r} on {['v100', 'k80'][i[1]]!r}")
    assert V.check_matrix([[-1.0]], "X", nonneg=False).tolist() == [[-1.0]]


def test_check_vector_and_integer_array() -> None:
    assert V.check_vector(2, "w", 3).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(hs.ValidationError, match=r"^`w` must have shape \(n_jobs,\) = \(3,\); got \(2,\)\.$"):
        V.check_vector([1, 2], "w", 3)
    assert V.check_integer_array(np.array([1.0, 4.0]), "s", str).tolist() == [1, 4]
    with pytest.raises(hs.ValidationError, match=r"^`s` must be positive integers; job 1 has 2\.5\.$"):
        V.check_integer_array(np.array([1.0, 2.5]), "s", lambda j: f"job {j}")
    with pytest.raises(hs.ValidationError, match=r"^`c` must be non-negative integers; type 'k80' has nan\.$"):
        V.check_integer_array(np.array([0.0, np.nan]), "c", lambda k: f"type {['v100', 'k80'][k]!r}", low=0)


def test_check_interval_and_as_rng() -> None:
    assert V.check_interval((1, 2.5), "r", low=0.0, low_open=True) == (1.0, 2.5)
    for bad in ((2, 1), (0, 1), (1, math.inf), (1,), "ab", (True, 2)):
        m = refused(V.check_interval, bad, "r", low=0.0, low_open=True)
        assert m["rule"] == "a pair (low, high) of finite numbers with low <= high, low > 0"
    gen = np.random.default_rng(3)
    assert V.as_rng(gen) is gen
    assert V.as_rng(np.int64(5)).random() == np.random.default_rng(5).random()
    for bad in (-1, True, 1.0, None):
        assert refused(V.as_rng, bad, "seed")["rule"] == "a non-negative int or a numpy.random.Generator"


# ------------------------------------------------------------------ trace column schema
def _checks(n: int, errors: str = "skip") -> tuple[LoadReport, RowChecks]:
    report = LoadReport("f.csv", errors)
    return report, RowChecks(report, [f"line {i + 2}" for i in range(n)])


SCHEMA = (Field("steps", "int", low=0, low_open=True, rule="a positive integer"),
          Field("end", "time", missing="unfinished", invalid="bad_time"),
          Field("arrival", low=0))


def test_apply_schema_reads_converts_and_checks_each_column() -> None:
    cells = {"steps": ["10", "2.5", "", "0", "7"],
             "end": ["2020-01-01 00:00:10", "5", "6", "7", "nope"],
             "arrival": ["1", "2", "3", "4", "-1"]}
    report, chk = _checks(5)
    cols = apply_schema(chk, cells, SCHEMA)
    chk.resolve()
    assert cols["end"].values[0] == 1577836810.0  # 2020-01-01T00:00:10 UTC in seconds
    assert chk.alive.tolist() == [True, False, False, False, False]
    # first failing reason per row, in schema order (parse failures before rules)
    assert report.counts["malformed"] == {"bad_value": 2, "missing_field": 1, "bad_time": 1}
    assert report.skipped == [
        "f.csv: line 3: `steps` must be an integer; got '2.5'",
        "f.csv: line 4: `steps` is missing (got '')",
        "f.csv: line 5: `steps` must be a positive integer; got '0'",
        "f.csv: line 6: `end` must be seconds or a date-time 'YYYY-MM-DD HH:MM:SS'; got 'nope'",
    ]


def test_apply_schema_errors_modes() -> None:
    cells = {"steps": ["1", "1"], "end": ["1", ""], "arrival": ["-3", "0"]}
    # "raise": the stage records the rows; the end of the read raises, counting them all
    report, chk = _checks(2, "raise")
    apply_schema(chk, cells, SCHEMA)
    chk.resolve()
    with pytest.raises(hs.ValidationError, match=re.escape(
            "f.csv: 2 of 2 row(s) cannot be used (bad_value: 1, unfinished: 1): line 2: `arrival` must be "
            "non-negative; got '-3'; line 3: `end` is missing")):
        report.check()
    report, chk = _checks(2, "skip")
    apply_schema(chk, cells, SCHEMA, prefix=lambda i: f"job {i}: ")
    chk.resolve()
    assert report.counts == {"dropped": {"unfinished": 1}, "malformed": {"bad_value": 1}, "filtered": {}}
    assert report.skipped[0] == "f.csv: line 2: job 0: `arrival` must be non-negative; got '-3'"


def test_field_refuses_unknown_kind() -> None:
    with pytest.raises(ValueError, match="kind must be one of"):
        Field("x", "date")


def test_read_json_file_names_the_file_and_the_fault(tmp_path):
    """The one reader of JSON configuration files (topology, tenants, interconnect)."""
    from hetsched.validation import read_json_file

    good = tmp_path / "t.json"
    good.write_text('{"a": [1, 2]}')
    assert read_json_file(good, "`topology` file") == {"a": [1, 2]}
    with pytest.raises(hs.ValidationError, match=r"`tenants` file '.*missing.json' does not exist\."):
        read_json_file(tmp_path / "missing.json", "`tenants` file")
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": \n ]')
    with pytest.raises(hs.ValidationError, match=r"interconnect file '.*bad.json' is not valid JSON: .* at line 2\."):
        read_json_file(bad, "interconnect file")
    with pytest.raises(hs.ValidationError, match=r"cannot be read: Is a directory"):
        read_json_file(tmp_path, "`topology` file")
