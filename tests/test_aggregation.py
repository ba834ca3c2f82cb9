"""Classes of identical jobs: the hashed path against an independent sort-based grouping."""

from __future__ import annotations

import numpy as np
import pytest

import hetsched as hs
from hetsched.formulations import aggregation
from hetsched.formulations.aggregation import SMALL_N, aggregate_jobs


def _jobs(seed: int, n: int):
    rng = np.random.default_rng(seed)
    base = np.round(np.exp(rng.normal(size=(max(2, n // 7), 3))), 2)
    T = base[rng.integers(0, base.shape[0], n)]
    T[rng.random(n) < 0.1, 1] = 0.0
    T[rng.random(n) < 0.05, 1] = -0.0  # the same value as 0.0 for every policy
    s = rng.choice([1, 2], n)
    w = rng.choice([1.0, 2.0], n)
    return hs.JobSet(T, gpu_types=["a", "b", "c"], scale_factors=s, weights=w)


def _reference_codes(jobs) -> np.ndarray:
    """Classes by numpy's sort-based unique over the rows, renumbered by first appearance."""
    key = np.column_stack([jobs.throughputs + 0.0, jobs.scale_factors, jobs.weights])
    _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inv.ravel()]


@pytest.mark.parametrize("seed", range(4))
def test_hashed_classes_equal_the_sort_based_ones(seed):
    jobs = _jobs(seed, 3 * SMALL_N)
    got = aggregate_jobs(jobs)
    np.testing.assert_array_equal(got.inverse, _reference_codes(jobs))
    np.testing.assert_array_equal(np.bincount(got.inverse), got.jobs.multiplicity)


def test_a_fingerprint_collision_falls_back_to_grouping_by_columns(monkeypatch):
    """Every row hashed alike: the check against each class's first row catches it."""
    import pandas.util

    monkeypatch.setattr(pandas.util, "hash_array", lambda v, *a, **k: np.zeros(len(v), dtype=np.uint64))
    jobs = _jobs(9, 3 * SMALL_N)
    cols = {"T0": jobs.throughputs[:, 0], "s": jobs.scale_factors}
    assert aggregation._hash_codes(cols) is None
    np.testing.assert_array_equal(aggregate_jobs(jobs).inverse, _reference_codes(jobs))
