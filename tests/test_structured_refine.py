"""Floor mode: violators from large fractional groups are refined rather than moved into
the master (``solvers.structured.floor._refine_violators``, ``_refined_bins``).

A fixed job whose group column the master left fractional is a violator at almost any new
prices; at 10^6 jobs one such group held 4,996 jobs. Such violators get bins
``REFINE_FACTOR`` times narrower instead (once each); refined jobs that are violators
again join the master. The bins are checked by hand, the choice of who joins on
hand-made rounds, and whole solves with refinement forced against HiGHS and against the
same solve without refinement. Also here: a master made infeasible by the regroup after a
round that moved violators in goes back to that round's prices (``_back_to_last_round``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import hetsched as hs
from checker import assert_feasible
from hetsched.solvers.structured import StructuredOptions, floor
from hetsched.solvers.structured.master import n_bins
from hetsched.solvers.structured.options import StructuredResult
from test_structured import _hard, _stage2_value  # the hard family and stage 2's objective, as there

REL = 1e-6


def test_refined_bins_by_hand() -> None:
    """rho 1.0001 and 1.004 share a level-0 bin (width 0.5 %: log(1.004)/log(1.005) = 0.80)
    and are 6 bins apart at level 1 (width 0.5 %/8: log(1.004)/log(1.000625) = 6.39);
    levels never share a bin; jobs without a runner-up get the level's last bin."""
    opts = StructuredOptions()
    assert opts.bin_width == 0.005 and floor.REFINE_FACTOR == 8 and floor.MAX_REFINE == 1
    rho = np.array([1.0001, 1.004, 1.0001, 1.004, np.inf, np.inf])
    has1 = np.array([True, True, True, True, False, False])
    fine = np.array([0, 0, 1, 1, 0, 1], dtype=np.int8)
    b, nb = floor._refined_bins(has1, rho, fine, opts)
    B0 = n_bins(opts)
    B1 = n_bins(StructuredOptions(bin_width=0.005 / 8))
    assert nb == (B0 + 1) + (B1 + 1)
    np.testing.assert_array_equal(b, [0, 0, B0 + 1, B0 + 1 + 6, B0, B0 + 1 + B1])


def test_refined_bins_keep_level_zero_keys() -> None:
    """Without refined jobs the bins and their count are those with every job at level 0,
    so a group's key (the master's basis across rounds) does not change when other jobs
    get refined."""
    rng = np.random.default_rng(0)
    rho = 1.0 + rng.exponential(0.05, 500)
    has1 = rng.random(500) < 0.8
    opts = StructuredOptions()
    b_none, nb_none = floor._refined_bins(has1, rho, None, opts)
    fine = (rng.random(500) < 0.3).astype(np.int8)
    b_fine, nb_fine = floor._refined_bins(has1, rho, fine, opts)
    assert nb_none == nb_fine
    np.testing.assert_array_equal(b_fine[fine == 0], b_none[fine == 0])
    b_zero, _ = floor._refined_bins(has1, rho, np.zeros(500, dtype=np.int8), opts)
    np.testing.assert_array_equal(b_zero, b_none)


def _round(u, uj, sj, fj):
    P = SimpleNamespace(n=20)
    S = SimpleNamespace(cols=np.zeros((20, 2), dtype=bool), fine=None)
    F = SimpleNamespace(fj=np.asarray(fj), uj=np.asarray(uj), sj=np.asarray(sj), agg=object())
    res = StructuredResult(status="unknown", message="", history=[{"round": 1}])
    return P, S, F, np.asarray(u, dtype=float), res


def test_only_violators_of_large_fractional_groups_are_refined(monkeypatch) -> None:
    monkeypatch.setattr(floor, "REFINE_MIN", 3)
    fj = np.arange(2, 14)                      # fixed jobs 2..13 (positions 0..11)
    # column 0: fractional, jobs at positions 0-3 (4 >= 3: refined); column 1: fractional,
    # positions 4-5 (2 < 3: they join); column 2: u = 1, positions 6-8 (not fractional);
    # column 3 (a shrink column): fractional, positions 9-11 through sj (3 jobs: refined)
    uj = [0, 0, 0, 0, 1, 1, 2, 2, 2, -1, -1, -1]
    sj = [-1, -1, -1, -1, -1, -1, -1, -1, -1, 3, 3, 3]
    P, S, F, u, res = _round([0.4, 0.7, 1.0, 0.2], uj, sj, fj)
    viol = np.array([2, 3, 6, 8, 11, 12])     # positions 0, 1, 4, 6, 9, 10
    join = floor._refine_violators(P, S, F, viol, u, res)
    np.testing.assert_array_equal(join, [6, 8])
    assert res.history[-1]["refined"] == 4
    np.testing.assert_array_equal(np.flatnonzero(S.fine), [2, 3, 11, 12])
    # the next round: the refined jobs, violators again, join (each job is refined once)
    res.history.append({"round": 2})
    join = floor._refine_violators(P, S, F, np.array([2, 4, 11]), u, res)
    np.testing.assert_array_equal(join, [2, 11])
    assert res.history[-1]["refined"] == 1     # job 4 (position 2, column 0) had not been refined yet
    assert S.fine[4] == 1 and S.fine[2] == 1


def test_no_refinement_without_restricted_masters_or_groups() -> None:
    P, S, F, u, res = _round([0.5], [0, 0, 0], [-1, -1, -1], [0, 1, 2])
    viol = np.array([0, 1])
    S.cols = None                              # the plain LP over every job: nothing to refine
    np.testing.assert_array_equal(floor._refine_violators(P, S, F, viol, u, res), viol)
    S.cols, F.agg = np.zeros((20, 2), dtype=bool), None
    np.testing.assert_array_equal(floor._refine_violators(P, S, F, viol, u, res), viol)
    assert res.history[-1]["refined"] == 0


@pytest.mark.parametrize("n,seed,policy", [(2000, 2, "max_min_fairness"), (3000, 1, "max_min_fairness"),
                                           (2000, 0, "min_makespan"), (2000, 3, "finish_time_fairness")])
def test_refined_solves_keep_the_optimum(n: int, seed: int, policy: str, monkeypatch) -> None:
    """With every fractional group refined (``REFINE_MIN`` = 1) refinement happens on the
    hard family, and both stages equal HiGHS's and the same solve's without refinement."""
    jobs, cluster = _hard(n, seed, policy)
    real = floor._refine_violators
    refined = []

    def spy(P, S, F, viol, u, res):
        out = real(P, S, F, viol, u, res)
        refined.append(res.history[-1]["refined"])
        assert res.history[-1]["refined"] == viol.size - out.size
        return out

    monkeypatch.setattr(floor, "_refine_violators", spy)
    opts = {"base_size": 100, "fallback": "none"}
    monkeypatch.setattr(floor, "REFINE_MIN", 1)
    a = hs.solve(policy, jobs, cluster, solver="structured", options=opts)
    assert sum(refined) > 0, "nothing was refined: the test no longer exercises refinement"
    monkeypatch.setattr(floor, "REFINE_MIN", 10**9)
    plain = hs.solve(policy, jobs, cluster, solver="structured", options=opts)
    b = hs.solve(policy, jobs, cluster, solver="highs")
    assert a.status == plain.status == b.status == "optimal", (a.message, plain.message, b.message)
    assert a.extra["second_stage_status"] == "optimal"
    assert_feasible(a.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))
    mine = _stage2_value(policy, jobs, cluster, a)
    for res in (plain, b):
        assert a.objective == pytest.approx(res.objective, rel=REL)
        assert mine == pytest.approx(_stage2_value(policy, jobs, cluster, res), rel=REL)


@pytest.mark.parametrize("n,seed,policy", [(2000, 1, "max_min_fairness"), (2000, 2, "min_makespan"),
                                           (2000, 1, "finish_time_fairness")])
def test_overfilled_regroup_after_joins_goes_back_to_that_round(n: int, seed: int, policy: str,
                                                                monkeypatch) -> None:
    """A master made infeasible by regrouping after a round that moved violators in goes
    back to that round's prices with those violators in the master and its released jobs
    back (``floor._back_to_last_round``). With few joiners per round (``max_add`` 40) it
    happens on these hard instances; the master that follows is feasible, as the function's
    argument says, and both stages equal HiGHS's and the same solve's without going back
    (the widened re-solve and raised prices of before)."""
    jobs, cluster = _hard(n, seed, policy)
    events: list[tuple] = []
    real_back, real_retry = floor._back_to_last_round, floor._floor_retry

    def back_spy(P, S):
        went = real_back(P, S)
        if went:
            events.append(("back", id(S)))
        return went

    def retry_spy(P, S, res, status, *args):
        events.append(("status", id(S), status))
        return real_retry(P, S, res, status, *args)

    monkeypatch.setattr(floor, "_back_to_last_round", back_spy)
    monkeypatch.setattr(floor, "_floor_retry", retry_spy)
    opts = {"base_size": 100, "fallback": "none", "max_add": 40}
    a = hs.solve(policy, jobs, cluster, solver="structured", options=opts)
    backs = [i for i, e in enumerate(events) if e[0] == "back"]
    assert backs, "no round went back: the test no longer exercises the rule"
    for i in backs:
        after = [e for e in events[i + 1:] if e[0] == "status" and e[1] == events[i][1]]
        assert after and after[0][2] == "optimal", f"the master after going back was {after[:1]}"
    monkeypatch.setattr(floor, "_back_to_last_round", lambda P, S: False)
    before = hs.solve(policy, jobs, cluster, solver="structured", options=opts)
    b = hs.solve(policy, jobs, cluster, solver="highs")
    assert a.status == before.status == b.status == "optimal", (a.message, before.message, b.message)
    assert_feasible(a.X, jobs.throughputs, jobs.scale_factors, cluster.capacities(jobs.gpu_types))
    mine = _stage2_value(policy, jobs, cluster, a)
    for res in (before, b):
        assert a.objective == pytest.approx(res.objective, rel=REL)
        assert mine == pytest.approx(_stage2_value(policy, jobs, cluster, res), rel=REL)
