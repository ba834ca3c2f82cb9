"""HiGHS backend: an infeasibility verdict is re-checked without presolve only when
presolve ran (``solvers.highs.run_rechecked``).

The re-check guards against presolve declaring a feasible LP infeasible. HiGHS does not
presolve a model it starts from a basis, so re-checking such a verdict repeated the same
run from scratch (3.2 s on a structured master at 10^6 jobs).
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from hetsched.solvers.highs import HighsBackend
from hetsched.solvers.program import LinearProgram

LOGGER = "hetsched.solvers.highs"


def _lp(rhs: float) -> LinearProgram:
    """max x0 + x1 s.t. x0 + x1 >= rhs, 0 <= x <= 1: infeasible for rhs > 2."""
    A = sp.csr_array(np.array([[1.0, 1.0]]))
    return LinearProgram(c=np.ones(2), A=A, row_lb=np.array([rhs]), row_ub=np.array([np.inf]), col_lb=np.zeros(2),
                         col_ub=np.ones(2), x_index=np.array([[0, 1]]), sense="max", name="tiny")


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_presolved_infeasibility_is_rechecked(caplog) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        out = HighsBackend().solve(_lp(3.0))
    assert out.status == "infeasible"
    msgs = _messages(caplog)
    assert any("re-checking without presolve" in m for m in msgs), msgs
    assert not any("not re-checked" in m for m in msgs), msgs


def test_infeasibility_from_a_starting_basis_is_not_rechecked(caplog) -> None:
    start = (np.zeros(2, dtype=np.int8), np.ones(1, dtype=np.int8))   # both columns at 0, the row's slack basic
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        out = HighsBackend(start=start).solve(_lp(3.0))
    assert out.status == "infeasible"
    msgs = _messages(caplog)
    assert any("without presolve; not re-checked" in m for m in msgs), msgs
    assert not any("re-checking without presolve" in m for m in msgs), msgs


def test_a_feasible_lp_from_a_starting_basis_is_unaffected() -> None:
    start = (np.zeros(2, dtype=np.int8), np.ones(1, dtype=np.int8))
    out = HighsBackend(start=start).solve(_lp(1.5))
    assert out.status == "optimal"
    assert out.objective == 2.0
    np.testing.assert_allclose(out.x, [1.0, 1.0])
