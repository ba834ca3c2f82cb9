"""Issue 30, item 3: a public function given an argument of the wrong type refuses it with a
ValidationError that names the argument, the type expected and the type received -- never an
AttributeError / KeyError / IndexError from deep inside.

The functions were found by a sweep of every function and method exported in an ``__all__``
whose parameter is typed ``Any`` (or untyped) and whose body reads attributes of it, and by
calling the public entry points with a dict, a string and a DataFrame in each argument.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.formulations.spaces.packing import Packing
from hetsched.inputs.throughputs import reference_column
from hetsched.sim import plots, window_mask
from hetsched.solvers.certificate import certify

WRONG = [pytest.param({"a": 1}, "dict", id="dict"), pytest.param("x", "str", id="str"),
         pytest.param(pd.DataFrame({"a": [1]}), "DataFrame", id="DataFrame")]


@pytest.fixture(scope="module")
def setup():
    cat = hs.generate_catalogue(pairs=True)
    cluster = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    work = hs.generate_workload(6, rate_per_hour=4, seed=0, catalogue=cat)
    res = hs.simulate("fifo", work, cluster)
    return cat, cluster, work, res


def test_packing_from_a_generated_workload(setup):
    """``Packing.from_workload(hs.generate_workload(...), cat)`` is the natural call: it works
    (it raised AttributeError: 'Trace' object has no attribute 'rows'), and a wrong type is named."""
    cat, _, work, _ = setup
    packing = Packing.from_workload(work, cat)
    assert packing.gpu_types == tuple(cat.gpu_types)
    with pytest.raises(ValidationError, match=r"`workload` must be a hetsched.Workload .*; got dict"):
        Packing.from_workload({"jobs": 1}, cat)
    with pytest.raises(ValidationError, match=r"`catalogue` must be a ThroughputCatalogue; got DataFrame"):
        Packing.from_workload(work, pd.DataFrame({"a": [1]}))


@pytest.mark.parametrize("bad, kind", WRONG)
def test_plots_name_the_result_argument(setup, bad, kind):
    res = setup[3]
    with pytest.raises(ValidationError, match=rf"`result` must be a hetsched.SimulationResult .*; got {kind}"):
        plots.smoothed_utilization(bad)
    with pytest.raises(ValidationError, match=rf"`result` must be a hetsched.SimulationResult .*; got {kind}"):
        plots.utilization_over_time(bad)
    with pytest.raises(ValidationError, match=r"`results` must"):
        plots.utilization_by_type(bad)
    with pytest.raises(ValidationError, match=r"`results` must"):
        plots.run_labels(bad)
    # inside a list, a run that is not a result is named with its type
    with pytest.raises(ValidationError, match=rf"`results` must be a sequence of SimulationResults; item 1 is {kind}"):
        plots.run_labels([res, bad])
    if kind != "DataFrame":   # a DataFrame stands for a run's jobs / rounds table in these
        for fn in (plots.jct_cdf, plots.ftf_cdf, plots.solver_time_vs_size):
            with pytest.raises(ValidationError, match=r"`results` must"):
                fn(bad if kind == "str" else [res, bad])


def test_plots_accept_what_they_document(setup):
    res = setup[3]
    assert plots.run_labels([res, res]) == ["fifo (run 0)", "fifo (run 1)"]
    u, hours = plots.smoothed_utilization(res)
    assert "total" in u and hours > 0


@pytest.mark.parametrize("bad, kind", WRONG)
def test_validate_problem_and_certify_name_their_arguments(setup, bad, kind):
    _, cluster, work, _ = setup
    with pytest.raises(ValidationError, match=rf"`policy` must be a policy name \(str\) or a hetsched.policies object; "
                                              rf"got {kind}") if kind != "str" else pytest.raises(ValidationError):
        hs.validate_problem(bad, work.jobs, cluster)
    with pytest.raises(ValidationError, match=rf"`jobs` must be a hetsched.JobSet; got {kind}"):
        hs.validate_problem("max_min_fairness", bad, cluster)
    with pytest.raises(ValidationError, match=rf"`cluster` must be a hetsched.Cluster; got {kind}"):
        certify("max_min_fairness", {}, np.zeros((6, 3)), work.jobs, bad, status="optimal", objective=0.0, extra={})
    with pytest.raises(ValidationError, match=rf"`jobs` must be a hetsched.JobSet; got {kind}"):
        certify("max_min_fairness", {}, np.zeros((6, 3)), bad, cluster, status="optimal", objective=0.0, extra={})


def test_validate_problem_takes_a_policy_name_like_solve(setup):
    _, cluster, work, _ = setup
    caps = hs.validate_problem("max_min_fairness", work.jobs, cluster)
    assert caps.tolist() == [8.0, 8.0, 8.0]


@pytest.mark.parametrize("bad, kind", WRONG)
def test_catalogue_helpers_name_their_arguments(setup, bad, kind):
    cat = setup[0]
    with pytest.raises(ValidationError, match=rf"`catalogue` must be a hetsched.ThroughputCatalogue; got {kind}"):
        reference_column(bad)
    if kind == "dict":
        with pytest.raises(ValidationError, match=r"`scale_factors` must be a sequence .*; got dict"):
            cat.index_of([cat.job_types[0]], bad)
        with pytest.raises(ValidationError, match=r"`job_types` must be a sequence .*; got dict"):
            cat.index_of(bad, [1])
    if kind == "str":
        with pytest.raises(ValidationError, match=r"`scale_factors` must be integers"):
            cat.index_of([cat.job_types[0]], [bad])


@pytest.mark.parametrize("bad, kind", WRONG)
def test_workload_jobset_and_cluster_methods_name_their_arguments(setup, bad, kind):
    _, cluster, work, _ = setup
    with pytest.raises(ValidationError, match=r"`n` must be an integer"):
        work.head(bad)
    with pytest.raises(ValidationError, match=r"`index` must be integer positions or a boolean mask"):
        work.jobs.take(bad if kind != "DataFrame" else pd.DataFrame({"a": ["x"]}))
    if kind == "str":   # a lone string was split into one-letter GPU types, all of capacity 0
        lone = r"`gpu_types` must be a sequence of GPU type names; got the string 'x'"
        with pytest.raises(ValidationError, match=lone):
            cluster.capacities(bad)
        with pytest.raises(ValidationError, match=lone):
            work.jobs.with_columns(bad)
    else:
        with pytest.raises(ValidationError, match=r"`gpu_type` must be a GPU type name \(str\)"):
            cluster.count(bad)
    with pytest.raises(ValidationError, match=r"`resource` must be 'cpus' or 'memory'"):
        cluster.resource_vector(bad, ["v100"])


def test_jobset_take_rejects_out_of_range_and_wrong_masks(setup):
    jobs = setup[2].jobs
    with pytest.raises(ValidationError, match=r"`index` positions must be in \[0, 6\); got 6"):
        jobs.take([0, 6])
    with pytest.raises(ValidationError, match=r"`index` as a boolean mask must have shape \(6,\); got \(2,\)"):
        jobs.take([True, False])
    assert jobs.take([]).n_jobs == 0 and jobs.take(np.ones(6, dtype=bool)).n_jobs == 6


def test_capacities_refuses_what_is_not_a_sequence(setup):
    cluster = setup[1]
    with pytest.raises(ValidationError, match=r"`gpu_types` must be a sequence of GPU type names; got int"):
        cluster.capacities(3)


@pytest.mark.parametrize("bad, kind", [pytest.param({"a": 1}, "dict", id="dict"), pytest.param("x", "str", id="str"),
                                       pytest.param(None, "NoneType", id="None")])
def test_window_mask_names_arrivals(bad, kind):
    with pytest.raises(ValidationError, match=rf"`arrivals` must be a 1-d array of arrival times; got {kind}"):
        window_mask((0, 2), bad)
    assert window_mask((0, 2), [0.0, 1.0, 2.0]).tolist() == [True, True, False]
