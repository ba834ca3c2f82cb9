"""Floor masters started from the last round's basis (:mod:`hetsched.solvers.structured.basis`).

The basis only chooses where the simplex method starts, so the checks are: the mapping
carries each known status to the same job, type, row or group in the next master and
starts everything new as the module docstring says; the rounds do start warm on the hard
family; a solve started warm and one started cold reach the same certified optimum, equal
to HiGHS on the whole program; and a basis HiGHS cannot use leaves the master to start cold.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.solvers.highs import HighsBackend, set_start_basis
from hetsched.solvers.program import LinearProgram
from hetsched.solvers.structured import basis, recognize, rounds
from hetsched.solvers.structured.master import Aggregate, build_master

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from hard_instances import hard_instance  # noqa: E402

REL = 1e-6
SMALL = {"base_size": 16, "fallback": "none"}
UPPER = 2  # highspy.HighsBasisStatus.kUpper


def floor_problem(n: int, m: int, seed: int):
    """A floor-mode SeparableProblem: max-sum throughput on the hard family, with floors."""
    jobs, cluster = hard_instance(n, m, seed)
    P, why = recognize(hs.policies.MaxSumThroughput().formulate(jobs, cluster))
    assert why == "" and P.mode == "floor", why
    return P.take(np.arange(P.n), floors=np.full(P.n, 0.01))


def test_start_basis_maps_statuses_by_job_type_row_and_group():
    """Known jobs keep their variables' and rows' statuses (their positions in the master
    move when a job joins before them); new jobs start at 0 with slack rows basic; group
    columns and link rows are matched by key, new ones start at 0 with slack rows basic."""
    P = floor_problem(40, 3, 0)
    m = P.m
    rng = np.random.default_rng(1)
    amb0 = np.array([3, 10, 20])
    agg0 = Aggregate(cap=rng.random((P.n_cap, 3)), obj=rng.random(3), link=np.array([[0, 2]]), keys=np.array([7, 4, 9]))
    lp0, maps0 = build_master(P, amb0, cap_rhs=P.C_all, level=False, agg=agg0)
    col0 = rng.integers(0, 2, lp0.n_vars).astype(np.int8)
    row0 = rng.integers(0, 3, lp0.n_rows).astype(np.int8)
    prev = basis.capture_basis(P, amb0, lp0, maps0, agg0, col0, row0)
    amb1 = np.array([1, 3, 20])  # job 1 joins before job 3, job 10 left
    agg1 = Aggregate(cap=rng.random((P.n_cap, 3)), obj=rng.random(3), link=np.array([[1, 0]]), keys=np.array([9, 5, 4]))
    lp1, maps1 = build_master(P, amb1, cap_rhs=P.C_all, level=False, agg=agg1)
    col1, row1 = basis.start_basis(P, amb1, lp1, maps1, agg1, prev)
    for new_pos, old_pos in ((1, 0), (2, 2)):  # jobs 3 and 20
        for k in range(m):
            if lp1.x_index[new_pos, k] >= 0:
                assert col1[lp1.x_index[new_pos, k]] == col0[lp0.x_index[old_pos, k]]
        assert row1[maps1["t_row0"] + new_pos] == row0[maps0["t_row0"] + old_pos]
        assert row1[maps1["base"] + maps1["lv_pos"][new_pos]] == row0[maps0["base"] + maps0["lv_pos"][old_pos]]
    on = lp1.x_index[0] >= 0  # job 1 is new
    assert np.all(col1[lp1.x_index[0][on]] == basis.LOWER)
    assert row1[maps1["t_row0"]] == basis.BASIC and row1[maps1["base"] + maps1["lv_pos"][0]] == basis.BASIC
    np.testing.assert_array_equal(row1[: maps1["n_cap"]], row0[: maps0["n_cap"]])
    # groups: key 9 was column 2, key 4 was column 1; key 5 is new
    assert col1[0] == col0[2] and col1[2] == col0[1] and col1[1] == basis.LOWER
    # link row keyed by its first column's key: (5, 9) is new, (7, 9) is gone
    assert row1[maps1["n_cap"]] == basis.BASIC


def test_start_basis_declines_when_most_jobs_are_new():
    """More new jobs than known jobs and group columns: start cold (None)."""
    P = floor_problem(40, 3, 0)
    lp0, maps0 = build_master(P, np.array([5]), cap_rhs=P.C_all, level=False)
    prev = basis.capture_basis(P, np.array([5]), lp0, maps0, None, np.zeros(lp0.n_vars, dtype=np.int8),
                               np.ones(lp0.n_rows, dtype=np.int8))
    amb = np.array([1, 2, 5])
    lp1, maps1 = build_master(P, amb, cap_rhs=P.C_all, level=False)
    assert basis.start_basis(P, amb, lp1, maps1, None, prev) is None
    amb = np.array([2, 5])
    lp1, maps1 = build_master(P, amb, cap_rhs=P.C_all, level=False)
    assert basis.start_basis(P, amb, lp1, maps1, None, prev) is not None


def _solve(policy: str, jobs, cluster, cold: bool, monkeypatch):
    starts = []
    real = basis.start_basis

    def spy(*args):
        out = None if cold else real(*args)
        starts.append(out is not None)
        return out

    monkeypatch.setattr(rounds, "start_basis", spy)
    res = hs.solve(policy, jobs, cluster, solver="structured", options=SMALL)
    monkeypatch.setattr(rounds, "start_basis", real)
    return res, starts


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput"])
@pytest.mark.parametrize("seed", [0, 1])
def test_warm_and_cold_masters_reach_the_same_certified_optimum(policy, seed, monkeypatch):
    jobs, cluster = hard_instance(3000, 6, seed)
    warm, starts = _solve(policy, jobs, cluster, False, monkeypatch)
    assert any(starts), "no master started from the last round's basis"
    cold, _ = _solve(policy, jobs, cluster, True, monkeypatch)
    ref = hs.solve(policy, jobs, cluster, solver="highs")
    for res in (warm, cold):
        assert res.status == "optimal" and res.message.startswith("structured: certified"), res.message
        assert res.certificate is not None and res.certificate.ok
        assert res.objective == pytest.approx(ref.objective, rel=REL)
    eff = lambda r: float((r.X * jobs.throughputs).sum())  # stage 2's total, where the routes differ
    assert eff(warm) == pytest.approx(eff(cold), rel=REL)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 400), m=st.integers(1, 5), seed=st.integers(0, 10_000))
def test_hard_family_with_warm_masters_matches_highs(n, m, seed):
    """Down to one job and one type, weights 1 and 5, gangs of 8 on types with 1 GPU."""
    jobs, cluster = hard_instance(n, m, seed)
    try:
        ref = hs.solve("max_min_fairness", jobs, cluster, solver="highs")
    except ValidationError:  # a gang larger than every type it can run on
        assume(False)
    res = hs.solve("max_min_fairness", jobs, cluster, solver="structured", options=SMALL)
    assert res.status == ref.status == "optimal"
    assert res.objective == pytest.approx(ref.objective, rel=REL, abs=1e-12)
    assert res.certificate is not None and res.certificate.ok


def _tiny_lp() -> LinearProgram:
    import scipy.sparse as sp

    A = sp.csr_array(np.array([[1.0, 1.0], [1.0, -1.0]]))
    return LinearProgram(c=np.array([1.0, 2.0]), A=A, row_lb=np.array([-np.inf, -1.0]), row_ub=np.array([4.0, 1.0]),
                         col_lb=np.zeros(2), col_ub=np.full(2, np.inf), x_index=np.array([[0, 1]]), sense="max", name="tiny")


def test_a_basis_highs_rejects_starts_cold():
    """Statuses of the wrong length are rejected by HiGHS; the run then starts cold and is
    still optimal (x = (1.5, 2.5), objective 6.5 by hand: both rows tight)."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    from hetsched.solvers.highs import load_model

    load_model(h, _tiny_lp())
    assert set_start_basis(h, np.zeros(5, dtype=np.int8), np.zeros(1, dtype=np.int8)) is False
    out = HighsBackend(start=(np.zeros(5, dtype=np.int8), np.zeros(1, dtype=np.int8)), keep_basis=True).solve(
        _tiny_lp(), options={"solver": "simplex"})
    assert out.status == "optimal" and out.objective == pytest.approx(6.5)
    np.testing.assert_allclose(out.x, [1.5, 2.5])
    col, row = out.info["basis"]
    assert list(col) == [basis.BASIC, basis.BASIC] and list(row) == [UPPER, basis.LOWER]


def test_a_given_basis_is_where_simplex_starts():
    """The optimal basis handed back as the start: zero simplex iterations."""
    first = HighsBackend(keep_basis=True).solve(_tiny_lp(), options={"solver": "simplex"})
    again = HighsBackend(start=first.info["basis"]).solve(_tiny_lp(), options={"solver": "simplex"})
    assert again.status == "optimal" and again.info["simplex_iterations"] == 0
    assert first.info["simplex_iterations"] > 0
