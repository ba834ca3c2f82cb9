"""The exact fallback (hetsched.solvers.fallback): a program another backend fails on is
re-solved by HiGHS, and the result says so. Fake backends stand in for the failures so each
path is exercised directly."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import hetsched as hs
from hetsched.solvers.certificate import DEFAULT_TOL
from hetsched.solvers.context import SolveContext
from hetsched.errors import SolverError
from hetsched.formulations.base import PolicyOutcome
from hetsched.formulations.common import retry_exact
from hetsched.solvers.program import LinearProgram
from hetsched.solvers import registry
from hetsched.solvers.base import Backend, SolverOutput
from hetsched.solvers.fallback import FEASIBILITY_TOL, fallback_reason, scaled_violation

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fuzz

# two jobs on one type with 1 GPU: max-sum throughput puts the GPU on the faster job (3 > 1)
JOBS = hs.JobSet([[3.0], [1.0]], gpu_types=["v100"])
CLUSTER = hs.Cluster({"v100": 1})


def _fake(name: str, behaviour: str) -> type[Backend]:
    class Fake(Backend):
        module = "numpy"

        def solve(self, lp, *, time_limit=None, options=None):
            if behaviour == "raise":
                raise SolverError("fake backend crashed")
            x = np.full(lp.n_vars, 1.0)  # both jobs the whole GPU: capacity broken by 1
            status = {"violate": "optimal", "infeasible": "infeasible", "time_limit": "time_limit",
                      "numerical": "numerical_error"}[behaviour]
            ok = status in ("optimal", "time_limit")
            return SolverOutput(status=status, x=x if ok else np.full(lp.n_vars, np.nan),
                                objective=lp.objective_value(x) if ok else float("nan"), has_solution=ok,
                                native_status=behaviour, message=f"fake: {behaviour}", solve_s=0.0, backend=name)

    Fake.name = name
    return Fake


@pytest.fixture
def fake(monkeypatch):
    def install(behaviour: str) -> str:
        name = f"fake_{behaviour}"
        monkeypatch.setitem(registry._REGISTRY, name, _fake(name, behaviour))
        return name
    return install


@pytest.mark.parametrize("behaviour, why", [
    ("raise", r"fake_raise failed \(fake backend crashed\)"),
    ("violate", r"returned a point violating the program by 1 \(> 1e-07\)"),
    ("infeasible", r"declared the program 'infeasible'; re-checked"),
    ("numerical", r"ended 'numerical_error'"),
])
def test_failures_are_resolved_by_highs_and_said(fake, behaviour: str, why: str) -> None:
    res = hs.solve("max_sum_throughput", JOBS, CLUSTER, solver=fake(behaviour))
    assert res.status == "optimal" and res.certificate.ok
    np.testing.assert_allclose(res.X, [[1.0], [0.0]], atol=1e-9)  # hand-derived optimum
    assert res.objective == pytest.approx(3.0)
    assert "highs" in res.solver.split(",")
    assert len(res.extra["fallbacks"]) == 1
    assert res.extra["fallbacks"][0].startswith("max_sum_throughput")
    assert "re-solved by the exact fallback" in res.message
    assert re.search(why, res.message), res.message


def test_a_time_limit_is_not_a_failure(fake) -> None:
    out = SolveContext(solver=fake("time_limit")).run(
        hs.policies.MaxSumThroughput().formulate(JOBS, CLUSTER))
    assert out.status == "time_limit" and out.backend == "fake_time_limit"


def test_highs_failures_are_not_retried() -> None:
    lp = hs.policies.MaxSumThroughput().formulate(JOBS, CLUSTER)
    out = SolverOutput(status="numerical_error", x=np.full(lp.n_vars, np.nan), objective=float("nan"),
                       has_solution=False, native_status="x", message="", solve_s=0.0, backend="highs")
    assert fallback_reason(lp, out, user_options=False) is None


def test_iteration_limit_is_kept_when_the_user_set_options() -> None:
    lp = hs.policies.MaxSumThroughput().formulate(JOBS, CLUSTER)
    out = SolverOutput(status="iteration_limit", x=np.full(lp.n_vars, np.nan), objective=float("nan"),
                       has_solution=False, native_status="x", message="", solve_s=0.0, backend="clarabel")
    assert fallback_reason(lp, out, user_options=True) is None
    assert "iteration limit" in fallback_reason(lp, out, user_options=False)


def test_scaled_violation_by_hand() -> None:
    # rows: x0 + x1 <= 10 (scale 10), x0 >= 0.5 (scale 1); columns in [0, 2]
    lp = LinearProgram(c=np.ones(2), A=sp.csr_array(np.array([[1.0, 1.0], [1.0, 0.0]])),
                       row_lb=np.array([-np.inf, 0.5]), row_ub=np.array([10.0, np.inf]),
                       col_lb=np.zeros(2), col_ub=np.full(2, 2.0), x_index=np.zeros((1, 2), dtype=int))
    assert scaled_violation(lp, np.array([1.0, 1.0])) == 0.0
    assert scaled_violation(lp, np.array([0.25, 1.0])) == pytest.approx(0.25)   # row 2: 0.5 - 0.25
    assert scaled_violation(lp, np.array([1.0, 2.5])) == pytest.approx(0.25)    # column 1: (2.5 - 2) / 2
    assert scaled_violation(lp, np.array([np.nan, 0.0])) == np.inf


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 18])
def test_scaled_violation_in_blocks_is_the_whole_vector_formula(block) -> None:
    # blocks that split rows and columns anywhere give the same number as the formula on whole vectors
    rng = np.random.default_rng(block)
    for _ in range(20):
        n_rows, n_vars = rng.integers(1, 12, 2)
        A = sp.csr_array(rng.normal(0, 1, (n_rows, n_vars)) * (rng.random((n_rows, n_vars)) < 0.6))
        def bounds(k):
            lb = np.where(rng.random(k) < 0.3, -np.inf, rng.normal(0, 5, k))
            return lb, np.where(rng.random(k) < 0.3, np.inf, np.maximum(lb, 0) + rng.uniform(0, 3, k))
        row_lb, row_ub = bounds(n_rows)
        col_lb, col_ub = bounds(n_vars)
        lp = LinearProgram(c=np.ones(n_vars), A=A, row_lb=row_lb, row_ub=row_ub, col_lb=col_lb, col_ub=col_ub,
                           x_index=np.zeros((1, n_vars), dtype=int))
        x = rng.normal(0, 4, n_vars)
        expect = 0.0
        for value, lb, ub in ((A @ x, row_lb, row_ub), (x, col_lb, col_ub)):
            for v, lo, hi in zip(value, lb, ub):
                if np.isfinite(lo):
                    expect = max(expect, (lo - v) / max(1.0, abs(lo)))
                if np.isfinite(hi):
                    expect = max(expect, (v - hi) / max(1.0, abs(hi)))
        assert scaled_violation(lp, x, block=block) == pytest.approx(expect, rel=1e-12, abs=0)
        x[rng.integers(n_vars)] = np.inf
        assert scaled_violation(lp, x, block=block) == np.inf


def test_fallback_tolerance_is_tighter_than_the_certificate() -> None:
    assert FEASIBILITY_TOL * 10 <= DEFAULT_TOL


def test_retry_exact_reruns_a_failed_chain_with_highs() -> None:
    ctx = SolveContext(solver="clarabel", options={"max_iter": 50})
    seen = []

    def attempt() -> PolicyOutcome:
        seen.append((ctx.solver, dict(ctx.options)))
        status = "infeasible" if len(seen) == 1 else "optimal"
        return PolicyOutcome(X=np.zeros((1, 1)), objective=0.0, status=status, message=f"try {len(seen)}")

    out = retry_exact(ctx, attempt, what="chain")
    assert seen == [("clarabel", {"max_iter": 50}), ("highs", {})]      # no Clarabel options for HiGHS
    assert (ctx.solver, ctx.options) == ("clarabel", {"max_iter": 50})  # restored
    assert out.status == "optimal" and "re-run with highs after 'clarabel' ended 'infeasible': try 1" in out.message
    assert ctx.fallbacks == ["chain: 'clarabel' ended 'infeasible' (try 1); re-run with highs"]


def test_retry_exact_keeps_a_time_limit() -> None:
    ctx = SolveContext(solver="clarabel")
    out = retry_exact(ctx, lambda: PolicyOutcome(X=np.zeros((1, 1)), objective=0.0, status="time_limit",
                                                 message="t"), what="chain")
    assert out.status == "time_limit" and ctx.fallbacks == []


@pytest.mark.parametrize("seed, policy, solver", [
    (995, "max_min_fairness", "cvxpy"),        # stage 2 let the minimum share fall 1.55e-5
    (1885, "max_min_fairness", "clarabel"),    # ... 1.3e-4
    (996, "finish_time_fairness", "cvxpy"),    # SolverError from cvxpy/CLARABEL on stage 2
    (30000, "max_min_fairness_water_filling", "cvxpy"),  # spurious slack-LP 'infeasible'
    (145, "hierarchical_max_min_fairness", "clarabel"),  # FIFO rank LP 'infeasible'
])
def test_fuzz_failures_of_the_last_run(seed: int, policy: str, solver: str) -> None:
    rec = fuzz.run_case(seed, policy, solver, time_limit=20.0)
    assert rec["outcome"] == "ok", rec
