"""Backends declare capabilities as data; code asks for capabilities, and "auto" is chosen in one
place (:func:`hetsched.solvers.choose_auto`).

The tables below record the choices the code made *before* capabilities replaced name checks
(read off ``solvers/registry.choose_auto``, ``structured/backend._general_choice``,
``water_filling._LevelModel``, ``sia.Sia.solve``, ``solvers/fallback.accepted_violation`` and
confirmed by running them): the same backend and options must come out now.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import hetsched as hs
from hetsched.solvers import context as engine
from hetsched.errors import CapabilityError, ValidationError
from hetsched.solvers.program import LinearProgram
from hetsched.solvers import Capabilities, capabilities, choose_auto, get_backend
from hetsched.solvers.clarabel_backend import ClarabelBackend
from hetsched.solvers.fallback import accepted_violation, exact_options

SIMPLEX = {"solver": "simplex"}
IPX = {"solver": "ipm", "run_crossover": "on"}


def program(n: int, *, mip: bool = False, structure: bool = False, chain: bool = False) -> LinearProgram:
    """max sum x over [0, 1]^n with one row sum x <= 1 (or rows x_i + x_{i+1} <= 1)."""
    if chain:
        i = np.arange(n - 1)
        A = sp.csr_array((np.ones(2 * (n - 1)), (np.r_[i, i], np.r_[i, i + 1])), shape=(n - 1, n))
    else:
        A = sp.csr_array(np.ones((1, n)))
    return LinearProgram(c=np.ones(n), A=A, row_lb=np.full(A.shape[0], -np.inf), row_ub=np.ones(A.shape[0]),
                         col_lb=np.zeros(n), col_ub=np.ones(n), x_index=np.arange(n).reshape(1, n),
                         integrality=np.ones(n, dtype=np.int8) if mip else None,
                         meta={"structure": "level"} if structure else {}, name=f"p{n}")


# (program, "auto" choice, the structured path's own fallback choice = today's _general_choice,
#  the warm-start choice = today's water-filling first solve, exact fallback options)
TABLE = [
    ({"n": 10}, ("highs", SIMPLEX), ("highs", SIMPLEX), ("highs", SIMPLEX), SIMPLEX),
    ({"n": 10, "mip": True}, ("highs", {}), ("highs", {}), ("highs", {}), {}),
    ({"n": 1_999}, ("highs", SIMPLEX), ("highs", SIMPLEX), ("highs", SIMPLEX), SIMPLEX),
    ({"n": 2_000}, ("clarabel", {}), ("clarabel", {}), ("highs", IPX), IPX),
    ({"n": 2_000, "mip": True}, ("highs", {}), ("highs", {}), ("highs", {}), {}),
    ({"n": 19_999, "structure": True}, ("clarabel", {}), ("clarabel", {}), ("highs", IPX), IPX),
    ({"n": 20_000, "structure": True}, ("structured", {}), ("clarabel", {}), ("highs", IPX), IPX),
    ({"n": 20_000}, ("clarabel", {}), ("clarabel", {}), ("highs", IPX), IPX),
    ({"n": 20_000, "mip": True, "structure": True}, ("highs", {}), ("highs", {}), ("highs", {}), {}),
]


@pytest.mark.parametrize("shape, auto, general, warm, exact", TABLE)
def test_auto_choice_is_unchanged(shape, auto, general, warm, exact):
    lp = program(**shape)
    assert choose_auto(lp) == auto
    assert choose_auto(lp, require=("general",)) == general
    assert choose_auto(lp, require=("warm_start",)) == warm
    assert exact_options(lp) == exact


@pytest.mark.parametrize("shape, auto, general", [
    ({"n": 2_000}, ("highs", IPX), ("highs", IPX)),
    ({"n": 20_000, "structure": True}, ("structured", {}), ("highs", IPX)),
    ({"n": 10}, ("highs", SIMPLEX), ("highs", SIMPLEX)),
])
def test_auto_choice_without_clarabel(monkeypatch, shape, auto, general):
    monkeypatch.setattr(ClarabelBackend, "available", classmethod(lambda cls: False))
    lp = program(**shape)
    assert choose_auto(lp) == auto
    assert choose_auto(lp, require=("general",)) == general


def test_structured_fallback_goes_to_the_general_choice():
    """A large program marked block-angular that is not: "auto" picks the structured path, which
    hands it to Clarabel (today's _general_choice), never back to itself."""
    lp = program(20_000, structure=True, chain=True)
    assert choose_auto(lp)[0] == "structured"
    out = get_backend("structured").solve(lp)
    assert out.info["delegated_to"] == "clarabel"
    assert out.status == "optimal" and out.objective == pytest.approx(10_000.0, rel=1e-6)


def test_structured_refuses_a_fallback_that_is_not_general():
    with pytest.raises(ValidationError, match=r"`options\['fallback'\]` must be a backend that solves any program"):
        get_backend("structured").solve(program(3, chain=True), options={"fallback": "structured"})


# -------------------------------------------------------------------- declared data
# (backend, mip, duals, warm start, gap option, presolve-off options, interior point, general)
DECLARED = [
    ("highs", True, True, True, "mip_rel_gap", (("presolve", "off"),), False, True),
    ("clarabel", False, True, False, None, (), True, True),
    ("cvxpy", True, False, False, None, (), True, True),
    ("pulp", True, False, False, "gapRel", (), False, True),
    ("structured", False, True, False, None, (), False, False),
]


@pytest.mark.parametrize("name, mip, duals, warm, gap, presolve, ipm, general", DECLARED)
def test_declared_capabilities(name, mip, duals, warm, gap, presolve, ipm, general):
    caps = capabilities(name)
    assert isinstance(caps, Capabilities)
    assert (caps.mip, caps.duals, caps.warm_start, caps.gap_option, caps.presolve_off, caps.interior_point,
            caps.general) == (mip, duals, warm, gap, presolve, ipm, general)
    backend = get_backend(name)
    assert (backend.supports_mip, backend.provides_duals) == (mip, duals)  # the old names read the flags


@pytest.mark.parametrize("name, violation", [("highs", 1e-9), ("clarabel", 1e-7), ("cvxpy", 1e-7),
                                             ("pulp", 1e-9), ("structured", 1e-9)])
def test_accepted_violation_is_unchanged(name, violation):
    assert accepted_violation(name) == violation


def test_unknown_capability_flag_is_refused():
    with pytest.raises(ValidationError, match=r"`require` must name capability flags .*; got \['quantum'\]"):
        choose_auto(program(3), require=("quantum",))


# ------------------------------------------------------------------ through hs.solve
JOBS = hs.JobSet([[2.0, 1.0], [1.0, 1.0], [3.0, 0.5]], gpu_types=["v100", "k80"])
CLUSTER = hs.Cluster({"v100": 1, "k80": 2})


@pytest.mark.parametrize("policy, solver, used", [
    ("max_min_fairness", "auto", "highs"),
    ("max_min_fairness", "clarabel", "clarabel"),
    ("max_min_fairness", "pulp", "pulp"),
    # water filling: warm HiGHS session for "auto" and "highs", rebuilt programs otherwise
    ("max_min_fairness_water_filling", "auto", "highs"),
    ("max_min_fairness_water_filling", "highs", "highs"),
    ("max_min_fairness_water_filling", "clarabel", "clarabel"),
    ("max_min_fairness_water_filling", "structured", "structured"),
    ("sia", "auto", "highs"),
    ("sia", "pulp", "pulp"),
])
def test_backend_used_is_unchanged(policy, solver, used):
    res = hs.solve(policy, JOBS, CLUSTER, solver=solver)
    assert res.success and res.solver == used


@pytest.mark.parametrize("solver, warm, ctx_runs", [("auto", True, 0), ("highs", True, 0), ("clarabel", False, 4),
                                                    ("pulp", False, 7), ("structured", False, 4)])
def test_water_filling_mode(monkeypatch, solver, warm, ctx_runs):
    """Warm (one HiGHS session, no SolveContext.run) exactly for "auto" and "highs"."""
    runs = []
    original = engine.SolveContext.run
    monkeypatch.setattr(engine.SolveContext, "run", lambda self, lp, **kw: runs.append(lp.name) or original(self, lp, **kw))
    assert engine.SolveContext(solver).warm_start is warm
    hs.solve("max_min_fairness_water_filling", JOBS, CLUSTER, solver=solver)
    assert len(runs) == ctx_runs


@pytest.mark.parametrize("solver, options", [
    ("auto", {"presolve": "off", "mip_rel_gap": "gap"}),
    ("highs", {"presolve": "off", "mip_rel_gap": "gap"}),
    ("pulp", {"gapRel": "gap"}),
    ("cvxpy", {}),
])
def test_sia_options_follow_capabilities(monkeypatch, solver, options):
    seen = []
    original = engine.SolveContext.run
    monkeypatch.setattr(engine.SolveContext, "run",
                        lambda self, lp, **kw: seen.append(dict(kw.get("options") or {})) or original(self, lp, **kw))
    hs.solve("sia", JOBS, CLUSTER, solver=solver)
    assert seen and {k: ("gap" if "gap" in k.lower() else v) for k, v in seen[0].items()} == options
    gaps = [v for k, v in seen[0].items() if "gap" in k.lower()]
    assert all(0 < g < 1 for g in gaps)


@pytest.mark.parametrize("solver", ["clarabel", "structured"])
def test_integer_programs_need_the_mip_capability(solver):
    with pytest.raises(CapabilityError, match=rf"`solver` '{solver}' cannot solve integer programs .*'highs'"):
        hs.solve("sia", JOBS, CLUSTER, solver=solver)


@pytest.mark.parametrize("solver", ["clarabel", "cvxpy", "pulp", "structured"])
def test_sessions_need_the_warm_start_capability(solver):
    ctx = engine.SolveContext(solver)
    with pytest.raises(CapabilityError, match=rf"needs `solver` 'auto' or a backend with that capability \['highs'\]; got '{solver}'"):
        ctx.open_session(program(3), purpose="test")


# ------------------------------------------------------------------ policy capabilities
def test_policy_capabilities():
    P = hs.policies
    assert P.Sia.emits_configurations and not P.MaxMinFairness.emits_configurations
    assert not P.MaxMinFairness().emits_allocation_rows and not P.Sia().emits_allocation_rows
    assert P.MaxMinFairness(packing="workload").emits_allocation_rows
    assert P.FinishTimeFairness(placement_sensitivity="workload").emits_allocation_rows
