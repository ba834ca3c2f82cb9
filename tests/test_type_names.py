"""GPU-type names that differ between jobs and cluster (issue 30, item 1): an error that names
both lists, never an "optimal" answer with idle GPUs."""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.inputs.cluster import check_gpu_type_names


def test_the_reported_case_is_refused_with_both_lists_and_a_hint():
    jobs = hs.JobSet([[3.0, 1.0], [2.0, 1.0]], gpu_types=["V100", "k80"])
    with pytest.raises(ValidationError) as err:
        hs.solve("max_min_fairness", jobs, hs.Cluster({"v100": 2, "k80": 2}))
    msg = str(err.value)
    assert "['V100', 'k80']" in msg and "['v100', 'k80']" in msg  # both lists
    assert "did you mean 'V100' -> 'v100'?" in msg


def test_simulation_refuses_it_too():
    trace = hs.JobSet([[3.0, 1.0], [2.0, 1.0]], gpu_types=["V100", "k80"], steps_remaining=[100.0, 100.0])
    with pytest.raises(ValidationError, match=r"`workload` and `cluster` name different GPU types"):
        hs.simulate("max_min_fairness", trace, hs.Cluster({"v100": 8, "k80": 8}))


def test_far_names_get_no_hint():
    with pytest.raises(ValidationError) as err:
        check_gpu_type_names(["a100"], hs.Cluster({"k80": 4}))
    assert "did you mean" not in str(err.value) and "['a100']" in str(err.value)


@pytest.mark.parametrize("types, counts", [
    (["v100", "k80"], {"v100": 2, "k80": 2}),   # the same names
    (["v100"], {"v100": 2, "k80": 0}),          # a cluster type listed with 0 GPUs: absent on purpose
    (["v100", "k80"], {"v100": 2}),             # jobs name a type the cluster lacks, every cluster GPU usable
    (["v100"], {"v100": 2, "k80": 2}),          # a cluster type no job names, but no unknown job type
])
def test_consistent_or_one_sided_names_pass(types, counts):
    check_gpu_type_names(types, hs.Cluster(counts))


def test_solving_same_names_still_uses_every_gpu():
    # each job is fastest on a v100 and there is one v100 per job: the max-min optimum gives
    # each job a whole v100 (rows sum to at most 1, so nothing better exists for either job)
    jobs = hs.JobSet([[3.0, 1.0], [2.0, 1.0]], gpu_types=["v100", "k80"])
    res = hs.solve("max_min_fairness", jobs, hs.Cluster({"v100": 2, "k80": 2}))
    assert res.success and np.allclose(res.X[:, 0], 1.0, atol=1e-6)
