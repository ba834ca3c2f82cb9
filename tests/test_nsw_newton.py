"""The Newton path of the partial-allocation auction: certified NSW optima for linear values.

Checked against hand-derived optima and duals, and against the conic solve of the same
programs (``themis_auction._solve_classes``, Clarabel) on random instances drawn with
weights, demands, empty types and classes with proportional values (degenerate supports).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hetsched.schedulers.nsw_newton import GAP_TOL, certify_support, nsw_bounds
from hetsched.schedulers.nsw_removals import solve_removals
from hetsched.schedulers.themis_auction import _linear, _solve_classes


def _conic(v, w, d, C):
    """The optimum of the same program by the conic solve (classes with w = 0 left out), and
    whether Clarabel called it optimal (not merely "inaccurate")."""
    keep = np.flatnonzero(w > 0)
    x, status = _solve_classes(_linear(v[keep], None), w[keep], d[keep], C)
    if status not in ("optimal", "inaccurate"):       # the reference failed: nothing to compare
        return None, False
    return float((w[keep] * np.log((v[keep] * x).sum(axis=1))).sum()), status == "optimal"


def _check_certificate(v, w, d, C, r):
    """Weak duality, recomputed here from scratch: r.x is feasible, r.prices and r.caps are
    >= 0, and the Lagrange dual bound they give is within 1e-8 of r.x's objective, so r.x is
    optimal to 1e-8 whatever solver produced it."""
    live = w > 0
    x, p, lam = r.x, r.prices, r.caps
    assert (x >= 0).all() and (p >= 0).all() and (lam >= 0).all()
    assert ((w[:, None] * x).sum(axis=0) <= C * (1 + 1e-12) + 1e-12).all()
    assert (x.sum(axis=1) <= d * (1 + 1e-12) + 1e-12).all()
    primal = sum(w[c] * math.log(float(v[c] @ x[c])) for c in np.flatnonzero(live))
    dual = float(p @ C)
    for c in np.flatnonzero(live):
        best = max(v[c, k] / (p[k] + lam[c]) for k in range(len(C)) if v[c, k] > 0 and C[k] > 0)
        dual += w[c] * ((lam[c] * d[c] if lam[c] > 0 else 0.0) - 1.0 + math.log(best))
    assert dual - primal <= 1e-8 * max(1.0, abs(primal))
    assert primal == pytest.approx(r.objective, abs=1e-9 * max(1.0, abs(primal)))


def test_two_bidders_by_hand():
    """v = ((2, 1), (1, 2)), one GPU of each type, no demand limit. NSW gives each bidder its
    favourite GPU (utilities 2 and 2, objective 2 log 2). Duals: beta = 1/2, and each bidder's
    favourite type is priced at its bang per buck, p = (2 * 1/2, 2 * 1/2) = (1, 1); the dual
    bound is sum p C + sum (log max v/p - 1) = 2 + 2 (log 2 - 1) = 2 log 2: no gap. Without
    bidder 1, bidder 0 takes both GPUs: utility 3, objective log 3."""
    v = np.array([[2.0, 1.0], [1.0, 2.0]])
    w, d, C = np.ones(2), np.full(2, np.inf), np.ones(2)
    start = np.array([[0.9, 0.05], [0.1, 0.95]])       # a nearby point, not the optimum
    r = certify_support(v, w, d, C, start)
    assert r is not None
    np.testing.assert_allclose(r.x, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(r.prices, [1.0, 1.0], rtol=1e-12)
    assert r.objective == pytest.approx(2 * math.log(2), abs=1e-12)
    assert 0 <= r.gap <= GAP_TOL
    lo, hi, _ = nsw_bounds(v, w, d, C, np.eye(2), np.array([1.0, 1.0]), np.zeros(2))
    assert lo == pytest.approx(2 * math.log(2)) and hi == pytest.approx(2 * math.log(2))
    # without bidder 1 (its class has no bidder left) and without bidder 0
    rem = solve_removals(v, w, d, C, r, np.array([1, 0]))
    assert all(x is not None for x in rem)
    assert rem[0].objective == pytest.approx(math.log(3), abs=1e-12)
    np.testing.assert_allclose(rem[0].x[0], [1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(rem[0].x[1], [0.0, 0.0])


def test_demand_cap_by_hand():
    """Two classes of two bidders each, values (1, 1) and (1, 1)... made distinct: class 0
    values (4, 1) with demand 1; class 1 values (1, 1) unlimited; offer (2, 4). Class 0's
    bidders each take 1 GPU of type 0 (their cap: utility 4), class 1's bidders split what is
    left, 1 of type 0 ... no: type 0 has 2 GPUs, both go to class 0 (2 bidders x 1), and
    class 1's two bidders take 2 GPUs of type 1 each (utility 2). Objective 2 log 4 + 2 log 2
    = 6 log 2. Removing a class-1 bidder: the other takes all 4 of type 1 (utility 4):
    2 log 4 + log 4 = 6 log 2 as well."""
    v = np.array([[4.0, 1.0], [1.0, 1.0]])
    w, d, C = np.array([2.0, 2.0]), np.array([1.0, np.inf]), np.array([2.0, 4.0])
    r = certify_support(v, w, d, C, np.array([[0.9, 0.1], [0.05, 1.9]]))
    assert r is not None
    np.testing.assert_allclose(r.x, [[1.0, 0.0], [0.0, 2.0]], atol=1e-12)
    assert r.objective == pytest.approx(6 * math.log(2), abs=1e-12)
    rem = solve_removals(v, w, d, C, r, np.array([1]))[0]
    assert rem is not None and rem.objective == pytest.approx(6 * math.log(2), abs=1e-12)
    np.testing.assert_allclose(rem.x[1], [0.0, 4.0], atol=1e-12)


def test_no_certificate_from_a_useless_start():
    """A start where some class has no utility cannot start Newton: None, not a guess."""
    v = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert certify_support(v, np.ones(2), np.full(2, np.inf), np.ones(2), np.zeros((2, 2))) is None


def _instance(draw_vals, weights, demands, caps, twins):
    v = np.asarray(draw_vals, float)
    if twins:            # class 1 is class 0 scaled (same model, another gang size): degenerate
        v[1] = v[0] * 0.5
    return v, np.asarray(weights, float), np.asarray(demands, float), np.asarray(caps, float)


_programs = st.integers(2, 7).flatmap(lambda n: st.integers(1, 4).flatmap(lambda m: st.tuples(
    st.lists(st.lists(st.floats(1e-2, 1e3), min_size=m, max_size=m), min_size=n, max_size=n),
    st.lists(st.integers(1, 6), min_size=n, max_size=n),
    st.lists(st.sampled_from([1.0, 2.0, 4.0, 8.0, np.inf]), min_size=n, max_size=n),
    st.lists(st.sampled_from([0, 1, 2, 3, 5, 8, 13]), min_size=m, max_size=m),
    st.booleans())))


@settings(max_examples=60, deadline=None)
@given(_programs)
def test_matches_the_conic_solve_on_random_programs(inst):
    """Every program the Newton path certifies passes a weak-duality check written here from
    scratch (feasible x, prices >= 0, dual bound within 1e-8), is never below the conic
    solve's value and equals it to 1e-6 where Clarabel reports optimal. Instances: weights, capped and uncapped
    classes, types with 0 or 1 GPU, values over five orders of magnitude, twin classes."""
    v, w, d, C = _instance(*inst)
    if C.sum() == 0:
        C[0] = 1.0
    v = np.where(C[None, :] > 0, v, 0.0)
    assume((v > 0).any(axis=1).all())                # every class values something offered
    x, status = _solve_classes(_linear(v, None), w.astype(int), d, C)
    assume(status in ("optimal", "inaccurate"))
    base = certify_support(v, w, d, C, x)
    if base is None:           # allowed (the caller then keeps the conic result) ...
        return
    _check_certificate(v, w, d, C, base)
    ref, exact = _conic(v, w, d, C)
    assume(ref is not None)
    # ours is certified; the conic value may be a little off where Clarabel stopped short
    assert base.objective >= ref - 1e-7 * max(1.0, abs(ref))
    if exact:
        assert base.objective == pytest.approx(ref, abs=1e-6 * max(1.0, abs(ref)))
    rem = solve_removals(v, w, d, C, base, np.arange(len(w)))
    for c, r in enumerate(rem):
        w2 = w.copy()
        w2[c] -= 1
        if r is None or not (w2 > 0).any():
            continue
        _check_certificate(v, w2, d, C, r)
        ref, exact = _conic(v, w2, d, C)
        if ref is None:
            continue
        assert r.objective >= ref - 1e-7 * max(1.0, abs(ref))
        if exact:
            assert r.objective == pytest.approx(ref, abs=1e-6 * max(1.0, abs(ref)))


def test_most_programs_are_certified_on_a_contended_round():
    """The case the path exists for: 60 classes of 1 to 20 bidders over 3 types, values from a
    per-type trend with proportional twins (one model at several gang sizes), half the demand
    offered. Every payment program must be certified (none left to the conic solver) and each
    equals the conic optimum."""
    rng = np.random.default_rng(3)
    models = rng.uniform(0.2, 1.0, (20, 3)) * np.array([1.0, 0.7, 0.3])
    gangs = np.array([1.0, 2.0, 4.0])
    v = np.concatenate([models / g for g in gangs])
    d = np.repeat(gangs, 20)
    w = rng.integers(1, 20, 60).astype(float)
    C = np.full(3, float(np.ceil((w * d).sum() / 6)))
    x, _ = _solve_classes(_linear(v, None), w.astype(int), d, C)
    base = certify_support(v, w, d, C, x)
    assert base is not None
    rem = solve_removals(v, w, d, C, base, np.arange(60))
    assert all(r is not None for r in rem)
    for c in range(60):
        w2 = w.copy()
        w2[c] -= 1
        _check_certificate(v, w2, d, C, rem[c])
    for c in rng.choice(60, 6, replace=False):
        w2 = w.copy()
        w2[c] -= 1
        assert rem[c].objective >= _conic(v, w2, d, C)[0] - 1e-7


def test_degenerate_support_from_an_exact_start():
    """Classes 0 and 1 value the two usable types alike (338.5, 288.8) and share both, with no
    demand binding: the flow between them around the cycle is free, so the KKT Jacobian of
    that support is singular. When the start is already optimal the whole program certifies
    without Newton steps (and without reducing the cycle); the removals must reduce it
    themselves and still certify every program (found by Hypothesis)."""
    v = np.array([[338.5, 288.796875, 1.0, 1.0], [338.5, 288.796875, 1.0, 2.0],
                  [655.0, 1.0, 1.0, 35.5], [1.0, 190.5, 1.0, 4.0]])
    w, d, C = np.array([3.0, 2.0, 4.0, 1.0]), np.array([4.0, 4.0, 2.0, 2.0]), np.array([13.0, 2.0, 0.0, 1.0])
    v = np.where(C[None, :] > 0, v, 0.0)
    x, status = _solve_classes(_linear(v, None), w.astype(int), d, C)
    base = certify_support(v, w, d, C, x)
    assert base is not None
    _check_certificate(v, w, d, C, base)
    rem = solve_removals(v, w, d, C, base, np.arange(4))
    for c, r in enumerate(rem):
        assert r is not None
        w2 = w.copy()
        w2[c] -= 1
        _check_certificate(v, w2, d, C, r)
