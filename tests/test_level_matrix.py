"""The level program's direct CSR assembly (formulations/level_matrix.py) and the X block's
indices (formulations/builder.py::AllocationVars) against a dense matrix written row by row
from their definitions, on full masks (the strided path), partial ones, jobs with no usable
type and one job."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.formulations.builder import AllocationVars
from hetsched.formulations.level_matrix import level_rows_csr


def dense_reference(mask: np.ndarray, load: np.ndarray, a: np.ndarray) -> np.ndarray:
    n, m = mask.shape
    var = {}
    for j in range(n):                    # row-major numbering of the usable pairs
        for k in range(m):
            if mask[j, k]:
                var[j, k] = len(var)
    t = len(var)
    M = np.zeros((2 * n + m, t + 1))
    for (j, k), v in var.items():
        M[j, v] = 1.0                     # job row: sum_k X_jk
        M[n + k, v] = load[j]             # capacity row: sum_j load_j X_jk
        M[n + m + j, v] = a[j, k]         # level row: sum_k a_jk X_jk - t
    M[n + m:, t] = -1.0
    return M


CASES = [(1, 1, 1.0), (1, 4, 0.5), (7, 3, 1.0), (40, 5, 1.0), (40, 5, 0.6), (60, 10, 0.2), (30, 2, 0.0)]


@pytest.mark.parametrize("n, m, density", CASES)
def test_the_direct_csr_equals_the_rows_written_from_their_definition(n, m, density):
    rng = np.random.default_rng([n, m, int(density * 10)])
    mask = rng.random((n, m)) < density if density < 1.0 else np.ones((n, m), dtype=bool)
    if n > 5 and density < 1.0:
        mask[3] = False                   # a job with no usable type
    a = np.where(mask, rng.uniform(0.01, 5.0, (n, m)), 0.0)
    load = rng.choice([1.0, 2.0, 4.0, 8.0], n) * rng.integers(1, 4, n)
    X = AllocationVars(mask, 0)
    got = level_rows_csr(X, load, a, X.size)
    assert got.shape == (2 * n + m, X.size + 1)
    np.testing.assert_array_equal(got.toarray(), dense_reference(mask, load, a))
    got.check_format(full_check=True)
    for r in range(got.shape[0]):         # HiGHS takes the rows as they are: indices sorted, no repeats
        assert np.all(np.diff(got.indices[got.indptr[r]:got.indptr[r + 1]]) > 0), r


@pytest.mark.parametrize("start", [0, 5])
@pytest.mark.parametrize("density", [1.0, 0.5, 0.0])
def test_allocation_vars_number_the_usable_pairs_row_major(start, density):
    rng = np.random.default_rng(int(density * 10) + start)
    mask = rng.random((9, 4)) < density if density < 1.0 else np.ones((9, 4), dtype=bool)
    X = AllocationVars(mask, start)
    job, gpu = np.nonzero(mask)
    assert X.size == job.size
    np.testing.assert_array_equal(X.job, job)
    np.testing.assert_array_equal(X.gpu, gpu)
    expect = np.full(mask.shape, -1)
    expect[job, gpu] = start + np.arange(job.size)
    np.testing.assert_array_equal(X.x_index, expect)
    np.testing.assert_array_equal(X.cols, start + np.arange(job.size))


def test_level_rows_refuse_an_x_block_that_does_not_start_at_zero():
    X = AllocationVars(np.ones((2, 2), dtype=bool), 3)
    with pytest.raises(ValueError, match="columns 0..n_x-1"):
        level_rows_csr(X, np.ones(2), np.ones((2, 2)), X.size + 3)


@pytest.mark.parametrize("policy", ["max_min_fairness", "min_makespan"])
def test_the_dense_layout_shortcuts_give_the_same_solve(policy, monkeypatch):
    # every pair usable: the structured path reads X[j, k] as variable j m + k (no index arrays,
    # A and W without copies); with the layout hidden it takes the general path: the same numbers
    import hetsched as hs
    from hetsched.solvers.structured import backend

    rng = np.random.default_rng(7)
    n = 3000
    jobs = hs.JobSet(rng.lognormal(0.0, 1.0, (n, 4)), gpu_types=["a", "b", "c", "d"],
                     scale_factors=rng.choice([1, 2, 4], n), weights=rng.choice([1.0, 5.0], n),
                     steps_remaining=rng.uniform(1e3, 1e5, n))
    cluster = hs.Cluster({"a": 700, "b": 300, "c": 64, "d": 1200})
    seen = []
    original = backend.recognize

    def recognize(lp, *, keep):
        seen.append(lp.x_block_start == 0)
        if not keep:
            lp.__dict__["x_block_start"] = None  # the cached layout check says "not a block"
        return original(lp)

    monkeypatch.setattr(backend, "recognize", lambda lp: recognize(lp, keep=True))
    dense = hs.solve(policy, jobs, cluster, solver="structured")
    assert seen and all(seen)
    monkeypatch.setattr(backend, "recognize", lambda lp: recognize(lp, keep=False))
    general = hs.solve(policy, jobs, cluster, solver="structured")
    assert dense.status == general.status == "optimal"
    np.testing.assert_array_equal(dense.X, general.X)
    assert dense.objective == general.objective
