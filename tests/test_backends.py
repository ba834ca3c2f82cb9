"""Every installed solver backend on hand-built programs whose optima are derived by hand,
failure paths (infeasible, unbounded, bad options, capability), cross-backend agreement on
random programs, and the one-process import check of cvxpy + highspy + OR-Tools."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import hetsched as hs
from hetsched.solvers.context import SolveContext
from hetsched.errors import CapabilityError, SolverError, UnknownSolverError, ValidationError
from hetsched.solvers.program import LinearProgram
from hetsched.solvers import get_backend

INF = np.inf
BACKENDS = hs.available_solvers()
MIP_BACKENDS = [name for name in BACKENDS if get_backend(name).supports_mip]


def make_lp(c, A, row_lb, row_ub, col_lb, col_ub, *, sense="max", integrality=None, offset=0.0):
    """A LinearProgram from dense lists (x_index is the whole of x, as one row)."""
    c = np.asarray(c, dtype=float)
    n = c.shape[0]
    A = sp.csr_array(np.asarray(A, dtype=float).reshape(-1, n)) if len(A) else sp.csr_array((0, n))
    return LinearProgram(
        c=c,
        A=A,
        row_lb=np.asarray(row_lb, dtype=float),
        row_ub=np.asarray(row_ub, dtype=float),
        col_lb=np.asarray(col_lb, dtype=float),
        col_ub=np.asarray(col_ub, dtype=float),
        x_index=np.arange(n).reshape(1, n),
        sense=sense,
        integrality=None if integrality is None else np.asarray(integrality, dtype=bool),
        offset=offset,
    )


def tiny_lp(**kw):
    """max x + y  s.t.  x + 2y <= 4,  3x + y <= 6,  x, y >= 0.

    The two rows bind at the optimum: x = 4 - 2y, 3(4 - 2y) + y = 6 -> y = 1.2, x = 1.6,
    objective 2.8 (the other vertices (0, 2) and (2, 0) give 2).
    """
    return make_lp([1, 1], [[1, 2], [3, 1]], [-INF, -INF], [4, 6], [0, 0], [INF, INF], **kw)


def assert_optimal(out, x, objective, *, lp, tol=1e-6):
    assert out.status == "optimal", out.message
    assert out.success and out.has_solution
    np.testing.assert_allclose(out.x, x, atol=tol)
    assert out.objective == pytest.approx(objective, rel=tol, abs=tol)
    assert lp.max_violation(out.x) <= tol


# --------------------------------------------------------------------------- hand-derived LPs


@pytest.mark.parametrize("name", BACKENDS)
def test_tiny_lp(name):
    """Optimum (1.6, 1.2), objective 2.8 (see :func:`tiny_lp`)."""
    lp = tiny_lp()
    out = get_backend(name).solve(lp)
    assert_optimal(out, [1.6, 1.2], 2.8, lp=lp)
    assert out.backend == name
    assert out.solve_s >= 0


@pytest.mark.parametrize("name", BACKENDS)
def test_offset_is_added(name):
    """Same LP with offset 1.5: objective 2.8 + 1.5 = 4.3."""
    lp = tiny_lp(offset=1.5)
    assert_optimal(get_backend(name).solve(lp), [1.6, 1.2], 4.3, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_equality_row(name):
    """min x + 2y  s.t.  x + y = 3,  x - y <= 1,  x, y >= 0.

    On the equality y = 3 - x, the objective is 6 - x and x - (3 - x) <= 1 gives x <= 2:
    optimum (2, 1), objective 4.
    """
    lp = make_lp([1, 2], [[1, 1], [1, -1]], [3, -INF], [3, 1], [0, 0], [INF, INF], sense="min")
    assert_optimal(get_backend(name).solve(lp), [2, 1], 4, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_column_upper_bounds(name):
    """max 3x + 2y  s.t.  x + y <= 4,  0 <= x <= 1,  0 <= y <= 2.5.

    Both columns sit at their upper bounds (x + y = 3.5 <= 4): (1, 2.5), objective 8.
    """
    lp = make_lp([3, 2], [[1, 1]], [-INF], [4], [0, 0], [1, 2.5])
    assert_optimal(get_backend(name).solve(lp), [1, 2.5], 8, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_min_sense_ranged_row_and_column_lower_bound(name):
    """min 2x + 3y  s.t.  2 <= x + y <= 10,  x - y <= 1,  x >= 0.5,  y >= 0.

    On x + y = 2 the objective is 6 - x, and x - (2 - x) <= 1 gives x <= 1.5: optimum
    (1.5, 0.5), objective 4.5 (x >= 0.5 is slack).
    """
    lp = make_lp([2, 3], [[1, 1], [1, -1]], [2, -INF], [10, 1], [0.5, 0], [INF, INF], sense="min")
    assert_optimal(get_backend(name).solve(lp), [1.5, 0.5], 4.5, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_fixed_column(name):
    """max x + y  s.t.  x + y <= 3,  x fixed at 1 (lb == ub),  y >= 0: (1, 2), objective 3."""
    lp = make_lp([1, 1], [[1, 1]], [-INF], [3], [1, 0], [1, INF])
    assert_optimal(get_backend(name).solve(lp), [1, 2], 3, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_zero_rows(name):
    """max x - y with only bounds 0 <= x <= 2, 0 <= y <= 3: (2, 0), objective 2."""
    lp = make_lp([1, -1], [], [], [], [0, 0], [2, 3])
    assert_optimal(get_backend(name).solve(lp), [2, 0], 2, lp=lp)


@pytest.mark.parametrize("name", BACKENDS)
def test_zero_rows_zero_variables(name):
    """No variables and no rows: optimal, objective = offset."""
    lp = make_lp([], [], [], [], [], [], offset=0.25)
    out = get_backend(name).solve(lp)
    assert out.status == "optimal" and out.success
    assert out.x.shape == (0,)
    assert out.objective == pytest.approx(0.25)


@pytest.mark.parametrize("name", BACKENDS)
def test_variable_in_no_row_and_no_objective(name):
    """A column that appears nowhere still gets a value within its bounds (objective 2)."""
    lp = make_lp([0, 1, 0], [[0, 1, 0]], [-INF], [2], [0, 0, 0], [INF, INF, 5])
    out = get_backend(name).solve(lp)
    assert out.status == "optimal"
    assert out.objective == pytest.approx(2, rel=1e-7)
    assert np.all(np.isfinite(out.x)) and lp.max_violation(out.x) <= 1e-6


@pytest.mark.parametrize("name", BACKENDS)
def test_infeasible(name):
    """x + y >= 3 with 0 <= x, y <= 1 has no solution."""
    lp = make_lp([1, 1], [[1, 1]], [3], [INF], [0, 0], [1, 1])
    out = get_backend(name).solve(lp)
    assert out.status == "infeasible", out.message
    assert not out.success and not out.has_solution
    assert np.isnan(out.x).all() and out.x.shape == (2,)
    assert np.isnan(out.objective)


@pytest.mark.parametrize("name", BACKENDS)
def test_unbounded(name):
    """max x + y  s.t.  x - y <= 1,  x, y >= 0: the ray (1, 1) is feasible forever."""
    lp = make_lp([1, 1], [[1, -1]], [-INF], [1], [0, 0], [INF, INF])
    out = get_backend(name).solve(lp)
    assert out.status in ("unbounded", "infeasible_or_unbounded"), out.message
    assert not out.success


# --------------------------------------------------------------------------- integer programs


def mixed_mip():
    """max x + y  s.t.  x + 2y <= 4.5,  3x + y <= 6,  x >= 0 continuous,  y >= 0 integer.

    y = 0: x <= 2, objective 2.  y = 1: x <= min(2.5, 5/3), objective 8/3.
    y = 2: x <= min(0.5, 4/3), objective 2.5.  Optimum (5/3, 1), objective 8/3.
    """
    return make_lp([1, 1], [[1, 2], [3, 1]], [-INF, -INF], [4.5, 6], [0, 0], [INF, INF], integrality=[0, 1])


def pure_mip():
    """max 5a + 4b  s.t.  6a + 4b <= 24,  a + 2b <= 6,  a, b >= 0 integer.

    The LP optimum is (3, 1.5) with 21. Integer candidates on the boundary: (4, 0) -> 20,
    (3, 1) -> 19, (2, 2) -> 18, (0, 3) -> 12; (4, 0) is optimal with 20.
    """
    return make_lp([5, 4], [[6, 4], [1, 2]], [-INF, -INF], [24, 6], [0, 0], [INF, INF], integrality=[1, 1])


@pytest.mark.parametrize("name", MIP_BACKENDS)
def test_mixed_integer(name):
    lp = mixed_mip()
    out = get_backend(name).solve(lp)
    assert_optimal(out, [5 / 3, 1], 8 / 3, lp=lp)
    if name in ("highs", "pulp"):
        assert out.mip_gap is not None and out.mip_gap <= 1e-6


@pytest.mark.parametrize("name", MIP_BACKENDS)
def test_pure_integer(name):
    lp = pure_mip()
    out = get_backend(name).solve(lp)
    assert_optimal(out, [4, 0], 20, lp=lp)


def test_clarabel_rejects_mip_through_engine():
    if "clarabel" not in BACKENDS:
        pytest.skip("clarabel not installed")
    with pytest.raises(CapabilityError, match="clarabel"):
        SolveContext("clarabel").run(mixed_mip())
    with pytest.raises(CapabilityError):
        get_backend("clarabel").solve(mixed_mip())


def test_cvxpy_mip_needs_mip_solver():
    if "cvxpy" not in BACKENDS:
        pytest.skip("cvxpy not installed")
    with pytest.raises(CapabilityError, match="CLARABEL"):
        get_backend("cvxpy").solve(mixed_mip(), options={"solver": "CLARABEL"})


def test_cvxpy_unknown_solver_lists_installed():
    if "cvxpy" not in BACKENDS:
        pytest.skip("cvxpy not installed")
    import cvxpy as cp

    with pytest.raises(UnknownSolverError, match="NO_SUCH_SOLVER|no_such_solver") as info:
        get_backend("cvxpy").solve(tiny_lp(), options={"solver": "no_such_solver"})
    assert cp.installed_solvers()[0] in str(info.value)


def test_cvxpy_solver_choice_is_case_insensitive():
    if "cvxpy" not in BACKENDS:
        pytest.skip("cvxpy not installed")
    lp = tiny_lp()
    out = get_backend("cvxpy").solve(lp, options={"solver": "highs"})
    assert_optimal(out, [1.6, 1.2], 2.8, lp=lp)
    assert out.info["cvxpy_solver"] == "HIGHS"


# --------------------------------------------------------------------------- options


BAD_OPTIONS = {
    "highs": [{"no_such_option": 1}],
    "clarabel": [{"no_such_setting": 1}, {"max_iter": "many"}],
    "cvxpy": [{"no_such_kwarg": 1}, {"solver": "HIGHS", "no_such_kwarg": 1}],
    "pulp": [{"timeLimit": 3}, {"threads": 0}, {"msg": "yes"}, {"gapRel": -0.1}],
}


@pytest.mark.parametrize(
    "name, options",
    [(name, opts) for name in BACKENDS for opts in BAD_OPTIONS.get(name, [])],
)
def test_bad_options_raise_validation_error(name, options):
    key = next(k for k in options if k != "solver")
    with pytest.raises(ValidationError, match=key):
        get_backend(name).solve(tiny_lp(), options=options)


GOOD_OPTIONS = {
    "highs": {"solver": "ipm"},
    "clarabel": {"tol_gap_rel": 1e-8, "max_iter": 100},
    "cvxpy": {"solver": "CLARABEL", "max_iter": 100},
    "pulp": {"msg": False, "gapRel": 0.0, "threads": 1},
}


@pytest.mark.parametrize("name", BACKENDS)
def test_good_options_accepted(name):
    lp = tiny_lp()
    assert_optimal(get_backend(name).solve(lp, options=GOOD_OPTIONS.get(name, {})), [1.6, 1.2], 2.8, lp=lp)


@pytest.mark.parametrize("name", [n for n in ("clarabel", "cvxpy") if n in BACKENDS])
def test_iteration_limit(name):
    """Two interior-point iterations cannot solve the random LP: "iteration_limit", no x."""
    lp = random_lp(np.random.default_rng(7), n=30, m=20)
    out = get_backend(name).solve(lp, options={"max_iter": 2})
    assert out.status == "iteration_limit", out.message
    assert not out.has_solution and np.isnan(out.x).all()


def test_clarabel_time_limit():
    if "clarabel" not in BACKENDS:
        pytest.skip("clarabel not installed")
    lp = random_lp(np.random.default_rng(8), n=30, m=20)
    out = get_backend("clarabel").solve(lp, time_limit=1e-9)
    assert out.status == "time_limit", out.message
    assert not out.has_solution and np.isnan(out.x).all()


def hard_knapsack():
    """A 120-item, 40-constraint multi-dimensional knapsack that takes CBC well over 0.2s."""
    rng = np.random.default_rng(0)
    n, m = 120, 40
    A = rng.integers(1, 100, (m, n)).astype(float)
    c = rng.integers(1, 100, n).astype(float)
    return make_lp(c, A, np.full(m, -INF), A.sum(axis=1) / 4, np.zeros(n), np.full(n, INF), integrality=np.ones(n))


@pytest.mark.parametrize("name", [n for n in ("pulp", "cvxpy") if n in MIP_BACKENDS])
def test_mip_time_limit_reports_incumbent_or_none(name):
    """Stopping on time is "time_limit" with the incumbent if any (PuLP alone would call a
    CBC incumbent "Optimal"; cvxpy folds time and iteration limits into "user_limit")."""
    lp = hard_knapsack()
    out = get_backend(name).solve(lp, time_limit=0.2)
    assert out.status == "time_limit", out.message
    assert not out.success
    if out.has_solution:
        assert lp.max_violation(out.x) <= 1e-6
        assert out.objective == pytest.approx(lp.objective_value(out.x))
        assert out.mip_gap is not None and out.mip_gap > 0
    else:
        assert np.isnan(out.x).all()


def test_cbc_gap_parser():
    from hetsched.solvers.pulp_backend import cbc_mip_gap

    assert cbc_mip_gap("Result - Optimal solution found\n\nObjective value: 3.0\n") == 0.0
    assert cbc_mip_gap("Result - Stopped on time limit\n\nObjective value: 10\nLower bound: 8\n") == pytest.approx(0.2)
    assert cbc_mip_gap("no summary here") is None


# --------------------------------------------------------------------------- duals


@pytest.mark.parametrize(
    "sense, c, row_lb, row_ub",
    [
        ("max", [1, 1], [-INF, -INF], [4, 6]),
        ("min", [-1, -1], [-INF, -INF], [4, 6]),
        ("min", [1, 1], [4, 6], [INF, INF]),
        ("max", [-1, -1], [4, 6], [INF, INF]),
        ("max", [1, 1], [4, 6], [4, 6]),
        ("min", [1, 1], [4, 6], [4, 6]),
    ],
)
def test_clarabel_duals_match_highs(sense, c, row_lb, row_ub):
    """Same sign convention as HiGHS: d(objective)/d(active bound)."""
    if "clarabel" not in BACKENDS:
        pytest.skip("clarabel not installed")
    lp = make_lp(c, [[1, 2], [3, 1]], row_lb, row_ub, [0, 0], [INF, INF], sense=sense)
    ref = get_backend("highs").solve(lp)
    out = get_backend("clarabel").solve(lp)
    np.testing.assert_allclose(out.row_dual, ref.row_dual, atol=1e-6)
    if sense == "max" and row_lb[0] == -INF:
        assert np.all(out.row_dual >= -1e-9)


# --------------------------------------------------------------------------- agreement


def random_lp(rng, n=None, m=None, *, integer=False):
    """A feasible, bounded random program around a known feasible point ``x0``.

    Columns are boxed in [lb, ub] containing x0; rows are a mix of ``<=``, ``>=``,
    ranged and equality rows, each satisfied by x0.
    """
    n = int(rng.integers(3, 13)) if n is None else n
    m = int(rng.integers(2, 11)) if m is None else m
    A = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.6)
    col_lb = np.where(rng.random(n) < 0.8, 0.0, -rng.uniform(0, 3, n))
    col_ub = col_lb + rng.uniform(1, 5, n)
    if integer:
        x0 = np.floor(rng.uniform(col_lb, col_ub))
        col_lb, col_ub = np.floor(col_lb), np.ceil(col_ub)
    else:
        x0 = rng.uniform(col_lb, col_ub)
    r = A @ x0
    kind = rng.integers(0, 4, m)  # 0 <=, 1 >=, 2 ranged, 3 equality
    slack = rng.uniform(0.1, 2, m)
    row_lb = np.where((kind == 1) | (kind == 2), r - slack, -INF)
    row_ub = np.where((kind == 0) | (kind == 2), r + slack, INF)
    if not integer:
        row_lb = np.where(kind == 3, r, row_lb)
        row_ub = np.where(kind == 3, r, row_ub)
    c = rng.normal(size=n)
    sense = "max" if rng.random() < 0.5 else "min"
    return make_lp(c, A, row_lb, row_ub, col_lb, col_ub, sense=sense,
                   integrality=np.ones(n) if integer else None, offset=float(rng.normal()))


def test_backends_agree_on_random_lps():
    rng = np.random.default_rng(20240611)
    for trial in range(30):
        lp = random_lp(rng)
        ref = get_backend("highs").solve(lp)
        assert ref.status == "optimal", (trial, ref.message)
        for name in BACKENDS:
            out = get_backend(name).solve(lp)
            assert out.status == "optimal", (trial, name, out.message)
            assert out.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-6), (trial, name)
            assert lp.max_violation(out.x) <= 1e-6, (trial, name)


def test_mip_backends_agree_on_random_mips():
    rng = np.random.default_rng(99)
    for trial in range(8):
        lp = random_lp(rng, integer=True)
        ref = get_backend("highs").solve(lp)
        assert ref.status == "optimal", (trial, ref.message)
        for name in MIP_BACKENDS:
            out = get_backend(name).solve(lp)
            assert out.status == "optimal", (trial, name, out.message)
            assert out.objective == pytest.approx(ref.objective, rel=1e-6, abs=1e-6), (trial, name)
            assert np.allclose(out.x, np.round(out.x), atol=1e-6)


def test_max_min_fairness_agrees_across_backends():
    rng = np.random.default_rng(5)
    types = ["v100", "p100", "k80"]
    for trial in range(3):
        n = int(rng.integers(3, 8))
        T = rng.uniform(0.5, 5.0, size=(n, 3)) * (rng.random((n, 3)) < 0.85)
        T[:, 2] = np.maximum(T[:, 2], 0.5)  # every job can run somewhere
        jobs = hs.JobSet(T, gpu_types=types)
        cluster = hs.Cluster({t: int(k) for t, k in zip(types, rng.integers(1, 5, 3))})
        objs = {}
        for name in BACKENDS:
            res = hs.solve("max_min_fairness", jobs, cluster, solver=name)
            assert res.success, (trial, name, res.message)
            objs[name] = res.objective
        ref = objs["highs"]
        for name, value in objs.items():
            assert value == pytest.approx(ref, rel=1e-6), (trial, name, objs)


# --------------------------------------------------------------------------- one process


def test_cvxpy_highspy_ortools_in_one_process():
    """cvxpy, highspy and OR-Tools' min-cost flow load and solve together.

    * cvxpy: :func:`tiny_lp`, optimum 2.8.
    * highspy: min x + y s.t. x + 2y >= 2, 3x + y >= 3, x, y >= 0; the vertices are (0, 3),
      (2, 0) and (0.8, 0.6) (both rows binding), so the optimum is 1.4.
    * min-cost flow: 2 units from node 0 to node 3 over arcs (tail, head, capacity, cost)
      (0,1,2,1), (0,2,1,2), (1,3,1,1), (2,3,2,1), (1,2,1,1). Path 0-1-3 costs 2 but carries
      1 unit; the second unit takes 0-2-3 or 0-1-2-3 at cost 3: optimum 5.
    """
    import cvxpy as cp
    import highspy
    from ortools.graph.python import min_cost_flow

    x = cp.Variable(2)
    prob = cp.Problem(cp.Maximize(cp.sum(x)), [x[0] + 2 * x[1] <= 4, 3 * x[0] + x[1] <= 6, x >= 0])
    prob.solve()
    assert prob.status == "optimal"
    assert prob.value == pytest.approx(2.8, rel=1e-6)

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.addCols(2, np.array([1.0, 1.0]), np.zeros(2), np.full(2, highspy.kHighsInf), 0, np.array([], dtype=np.int32),
              np.array([], dtype=np.int32), np.array([]))
    h.addRows(2, np.array([2.0, 3.0]), np.full(2, highspy.kHighsInf), 4, np.array([0, 2], dtype=np.int32),
              np.array([0, 1, 0, 1], dtype=np.int32), np.array([1.0, 2.0, 3.0, 1.0]))
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert h.getInfo().objective_function_value == pytest.approx(1.4, rel=1e-9)
    np.testing.assert_allclose(h.getSolution().col_value, [0.8, 0.6], atol=1e-9)

    mcf = min_cost_flow.SimpleMinCostFlow()
    tails = np.array([0, 0, 1, 2, 1])
    heads = np.array([1, 2, 3, 3, 2])
    caps = np.array([2, 1, 1, 2, 1])
    costs = np.array([1, 2, 1, 1, 1])
    mcf.add_arcs_with_capacity_and_unit_cost(tails, heads, caps, costs)
    mcf.set_nodes_supplies(np.arange(4), np.array([2, 0, 0, -2]))
    assert mcf.solve() == mcf.OPTIMAL
    assert mcf.optimal_cost() == 5


def test_backend_does_not_mutate_program():
    lp = random_lp(np.random.default_rng(3))
    before = (lp.A.copy(), lp.c.copy(), lp.row_lb.copy(), lp.row_ub.copy(), lp.col_lb.copy(), lp.col_ub.copy())
    for name in BACKENDS:
        get_backend(name).solve(lp)
    after = (lp.A, lp.c, lp.row_lb, lp.row_ub, lp.col_lb, lp.col_ub)
    assert (before[0] != after[0]).nnz == 0
    for b, a in zip(before[1:], after[1:]):
        np.testing.assert_array_equal(b, a)



# --------------------------------------------------------------------------- crashes and quirks


def test_clarabel_crash_is_solver_error(monkeypatch):
    if "clarabel" not in BACKENDS:
        pytest.skip("clarabel not installed")
    import clarabel

    def broken(*args, **kwargs):
        raise Exception("Bad input data: something")  # what clarabel raises on bad data

    monkeypatch.setattr(clarabel, "DefaultSolver", broken)
    with pytest.raises(SolverError, match="Bad input data"):
        get_backend("clarabel").solve(tiny_lp())


def test_clarabel_almost_solved_is_optimal_with_message(monkeypatch):
    if "clarabel" not in BACKENDS:
        pytest.skip("clarabel not installed")
    import types

    import clarabel

    real = clarabel.DefaultSolver

    class AlmostSolver:
        def __init__(self, *args):
            self._solver = real(*args)

        def solve(self):
            sol = self._solver.solve()
            fields = ("x", "z", "s", "iterations", "r_prim", "r_dual")
            return types.SimpleNamespace(status=clarabel.SolverStatus.AlmostSolved,
                                         **{f: getattr(sol, f) for f in fields})

    monkeypatch.setattr(clarabel, "DefaultSolver", AlmostSolver)
    lp = tiny_lp()
    out = get_backend("clarabel").solve(lp)
    assert_optimal(out, [1.6, 1.2], 2.8, lp=lp)
    assert out.native_status == "AlmostSolved"
    assert "almost solved (reduced tolerances)" in out.message


def test_cvxpy_crash_is_solver_error(monkeypatch):
    if "cvxpy" not in BACKENDS:
        pytest.skip("cvxpy not installed")
    import cvxpy as cp

    def broken(self, *args, **kwargs):
        raise cp.error.SolverError("Solver 'CLARABEL' failed. Try another solver.")

    monkeypatch.setattr(cp.Problem, "solve", broken)
    with pytest.raises(SolverError, match="failed"):
        get_backend("cvxpy").solve(tiny_lp())


def test_pulp_crash_is_solver_error(monkeypatch):
    if "pulp" not in BACKENDS:
        pytest.skip("pulp not installed")
    import pulp

    def broken(self, *args, **kwargs):
        raise pulp.PulpSolverError("Pulp: Error while executing cbc")

    monkeypatch.setattr(pulp.LpProblem, "solve", broken)
    with pytest.raises(SolverError, match="CBC failed"):
        get_backend("pulp").solve(tiny_lp())


@pytest.mark.parametrize("name", BACKENDS)
def test_empty_row_that_excludes_zero_is_infeasible(name):
    """A row with no coefficients and bounds [1, 2] can never hold (0 is not in [1, 2])."""
    lp = make_lp([1, 1], [[0, 0], [1, 1]], [1, -INF], [2, 3], [0, 0], [INF, INF])
    out = get_backend(name).solve(lp)
    assert out.status == "infeasible", out.message
    assert not out.has_solution and np.isnan(out.x).all()


@pytest.mark.parametrize("name", BACKENDS)
def test_no_variables_but_row_excluding_zero_is_infeasible(name):
    """Zero columns, one row with bounds [1, 2]: A @ x is 0, so the program is infeasible."""
    lp = LinearProgram(
        c=np.zeros(0), A=sp.csr_array((1, 0)), row_lb=np.array([1.0]), row_ub=np.array([2.0]),
        col_lb=np.zeros(0), col_ub=np.zeros(0), x_index=np.zeros((1, 0), dtype=np.int64),
    )
    out = get_backend(name).solve(lp)
    assert out.status == "infeasible", out.message
    assert not out.success and not out.has_solution


# --------------------------------------------------------------------------- Backend.solve's phases
@pytest.mark.parametrize(
    "name, options",
    # cvxpy hands every key but "solver" to the solver, which checks them only when it runs
    [(name, opts) for name in BACKENDS if name != "cvxpy" for opts in BAD_OPTIONS.get(name, [])],
)
def test_bad_options_raise_even_when_no_solver_runs(name, options):
    """_prepare runs before the empty-program shortcut: a bad option is refused for a program
    with no variables and for one with an empty row that excludes 0, not silently ignored."""
    key = next(k for k in options if k != "solver")
    no_vars = make_lp([], [], [], [], [], [])
    conflict = make_lp([1.0], [[0.0]], [1.0], [2.0], [0.0], [1.0])
    for lp in (no_vars, conflict):
        with pytest.raises(ValidationError, match=key):
            get_backend(name).solve(lp, options=options)


def test_backend_phases_run_in_order_and_the_shortcut_skips_the_solver():
    """A minimal backend: solve() calls _prepare for every program, _run only for a program
    with variables and no empty-row conflict, and _finish stamps backend and seconds."""
    from hetsched.solvers.base import Backend

    calls = []

    class Probe(Backend):
        name = "probe"

        def _prepare(self, lp, *, time_limit, options):
            calls.append(("prepare", lp.n_vars, time_limit, dict(options or {})))
            if (options or {}).get("bad"):
                raise ValidationError("`options['bad']` refused by the probe; got True.")
            return "token"

        def _run(self, lp, prepared, *, time_limit, t0):
            calls.append(("run", prepared))
            x = np.zeros(lp.n_vars)
            return self._finish(lp, t0, __import__("logging").getLogger("probe"), "probe", status="optimal",
                                x=x, objective=lp.objective_value(x), has_solution=True, native_status="done",
                                message="probe: done")

    out = Probe().solve(tiny_lp(), time_limit=5.0, options={"k": 1})
    assert calls == [("prepare", 2, 5.0, {"k": 1}), ("run", "token")]
    assert out.backend == "probe" and out.solve_s >= 0 and out.status == "optimal"
    calls.clear()
    empty = Probe().solve(make_lp([], [], [], [], [], [], offset=3.0))
    assert calls == [("prepare", 0, None, {})]  # settled without _run
    assert empty.status == "optimal" and empty.objective == 3.0 and empty.backend == "probe"
    calls.clear()
    infeasible = Probe().solve(make_lp([1.0], [[0.0]], [1.0], [2.0], [0.0], [1.0]))
    assert [c[0] for c in calls] == ["prepare"] and infeasible.status == "infeasible"
    with pytest.raises(ValidationError, match="bad"):
        Probe().solve(make_lp([], [], [], [], [], []), options={"bad": True})


def test_cvxpy_solver_choice_is_checked_even_when_no_solver_runs():
    """What cvxpy's _prepare checks itself (the solver name, MIP capability) is refused for an
    empty program too."""
    if "cvxpy" not in BACKENDS:
        pytest.skip("cvxpy not installed")
    with pytest.raises(UnknownSolverError, match="no_such_solver"):
        get_backend("cvxpy").solve(make_lp([], [], [], [], [], []), options={"solver": "no_such_solver"})
    with pytest.raises(CapabilityError):
        get_backend("cvxpy").solve(make_lp([1.0], [[0.0]], [1.0], [2.0], [0.0], [1.0], integrality=[True]),
                                   options={"solver": "CLARABEL"})
