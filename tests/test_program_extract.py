"""LinearProgram.extract_X: the contiguous-block slice agrees with reading X pair by pair."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.solvers.program import LinearProgram


def _lp(x_index: np.ndarray, n_vars: int) -> LinearProgram:
    return LinearProgram(c=np.zeros(n_vars), A=sp.csr_array((0, n_vars)), row_lb=np.zeros(0), row_ub=np.zeros(0),
                         col_lb=np.zeros(n_vars), col_ub=np.ones(n_vars), x_index=x_index)


def _pairwise(x_index: np.ndarray, x: np.ndarray) -> np.ndarray:
    """X read one pair at a time from the definition of ``x_index``."""
    X = np.zeros(x_index.shape)
    for j in range(x_index.shape[0]):
        for k in range(x_index.shape[1]):
            if x_index[j, k] >= 0:
                X[j, k] = x[x_index[j, k]]
    return X


@pytest.mark.parametrize("start", [0, 3])
def test_a_contiguous_block_is_sliced_and_copied(start):
    x_index = np.arange(start, start + 12).reshape(4, 3)
    x = np.arange(start + 13, dtype=float) * 1.5
    lp = _lp(x_index, x.size)
    assert lp.x_block_start == start
    X = lp.extract_X(x)
    np.testing.assert_array_equal(X, _pairwise(x_index, x))
    X[0, 0] = -7.0  # a copy: the solution vector is not changed through X
    assert x[start] == start * 1.5


@pytest.mark.parametrize("x_index", [
    np.array([[0, 2, 1], [3, 4, 5]]),          # same end points, not in order
    np.array([[0, -1, 1], [2, 3, 4]]),         # an unusable pair
    np.array([[-1, 0], [1, 2]]),               # starts with an unusable pair
    np.array([[0, 1], [5, 6]]),                # a gap (a variable between the rows)
])
def test_other_layouts_are_read_pair_by_pair(x_index):
    x = np.linspace(1.0, 2.0, 8)
    lp = _lp(x_index, x.size)
    assert lp.x_block_start is None
    np.testing.assert_array_equal(lp.extract_X(x), _pairwise(x_index, x))


def test_no_jobs():
    lp = _lp(np.zeros((0, 3), dtype=np.int64), 1)
    assert lp.extract_X(np.ones(1)).shape == (0, 3)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5), m=st.integers(1, 4), start=st.integers(0, 3), data=st.data())
def test_any_numbering_agrees_with_the_pairwise_read(n, m, start, data):
    usable = np.array(data.draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m))).reshape(n, m)
    order = data.draw(st.permutations(list(range(int(usable.sum())))))
    x_index = np.full((n, m), -1, dtype=np.int64)
    x_index[usable] = start + np.asarray(order, dtype=np.int64)
    x = np.arange(start + n * m + 1, dtype=float) + 0.25
    np.testing.assert_array_equal(_lp(x_index, x.size).extract_X(x), _pairwise(x_index, x))
