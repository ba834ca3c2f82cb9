"""Configuration search (hetsched.adaptive.search): Pollux's power-mean fitness over one
(GPU type, GPU count) per job, exact ILP against brute force and the genetic search.

Notation: s_jc the value of configuration c for job j (0 when unallocated), fitness =
((1/J) sum_j (s_j + eps)^p)^(1/p) (geometric mean for p = 0), per-type GPU totals <= C_k.
Brute force below enumerates every assignment and scores it with its own power mean
(no code shared with the module).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import hetsched.adaptive.search as search_mod
from hetsched.adaptive.search import (
    SearchProblem,
    SearchResult,
    exact_search,
    genetic_search,
)
from hetsched.errors import SolverError, ValidationError
from hetsched.solvers.base import SolverOutput

EPS = 1e-3
REL = 1e-9


# ------------------------------------------------------------------------------ helpers
def power_mean(s: np.ndarray, p: float, eps: float = EPS) -> np.ndarray:
    """Power mean of s + eps along the last axis (geometric for p = 0)."""
    x = np.asarray(s, dtype=float) + eps
    if p == 0:
        return np.exp(np.log(x).mean(axis=-1))
    return np.mean(x ** p, axis=-1) ** (1.0 / p)


def brute_force(value, allowed, ctype, gpus, cap, p) -> float:
    """Best fitness over every feasible assignment (each job: -1 or an allowed configuration)."""
    J = value.shape[0]
    options = [[-1] + list(np.flatnonzero(allowed[j])) for j in range(J)]
    combos = np.array(list(itertools.product(*options)), dtype=np.int64).reshape(-1, J)
    on = combos >= 0
    safe = np.maximum(combos, 0)
    used = np.zeros((combos.shape[0], len(cap)), dtype=np.int64)
    for k in range(len(cap)):
        used[:, k] = np.where(on & (ctype[safe] == k), gpus[safe], 0).sum(axis=1)
    ok = (used <= cap[None, :]).all(axis=1)
    s = np.where(on, value[np.arange(J)[None, :], safe], 0.0)
    fit = power_mean(s[ok], p)
    return float(fit.max())


def check_feasible(res: SearchResult, prob: SearchProblem) -> None:
    """Independent check: every chosen pair allowed, per-type GPU totals within capacity."""
    ch = np.asarray(res.choice)
    assert ch.shape == (prob.n_jobs,)
    used = np.zeros(prob.n_types, dtype=np.int64)
    for j, c in enumerate(ch):
        if c >= 0:
            assert prob.allowed[j, c], f"job {j} got configuration {c}, not allowed"
            used[prob.config_type[c]] += prob.config_gpus[c]
    assert (used <= prob.capacities).all(), f"used {used} > capacities {prob.capacities}"


def random_small(rng: np.random.Generator) -> tuple:
    """1-3 types, capacities among 0..8 (0 and 1 included often), up to 5 jobs, up to 7 configs."""
    m = int(rng.integers(1, 4))
    cap = rng.choice([0, 1, 1, 2, 3, 4, 5, 8], size=m).astype(np.int64)
    ctype, gpus = [], []
    for k in range(m):
        sizes = sorted(rng.choice([1, 2, 4, 8], size=int(rng.integers(1, 4)), replace=False))
        ctype += [k] * len(sizes)
        gpus += sizes
    ctype, gpus = np.array(ctype), np.array(gpus)
    if ctype.size > 7:
        ctype, gpus = ctype[:7], gpus[:7]
    J = int(rng.integers(1, 6))
    C = ctype.size
    value = rng.uniform(0, 3, size=(J, C)) * rng.choice([0.0, 1.0, 1.0, 1.0, 1.0], size=(J, C))
    allowed = rng.random((J, C)) < 0.85
    value = np.where(allowed, value, np.nan)
    p = float(rng.choice([-1.0, -1.0, -0.5, -2.0, 0.0, 0.5, 1.0]))
    return value, allowed, ctype, gpus, cap, p


def medium(seed: int, jobs: int = 30, p: float = -1.0) -> tuple[SearchProblem, np.ndarray]:
    """Pollux-like: concave speedups that peak, on 3 types (8-, 8-, 4-GPU nodes), restart discount."""
    rng = np.random.default_rng(seed)
    cap = np.array([16, 8, 12])
    per = [8, 8, 4]
    ctype, gpus = [], []
    for k in range(3):
        sizes = [1, 2, 4] + ([8] if per[k] == 8 else []) + list(range(2 * per[k], cap[k] + 1, per[k]))
        ctype += [k] * len(sizes)
        gpus += sizes
    ctype, gpus = np.array(ctype), np.array(gpus)
    speed = np.array([1.0, 0.6, 0.3])[ctype]
    f = rng.lognormal(0, 0.5, size=jobs)
    alpha = rng.uniform(0.05, 0.4, size=jobs)
    beta = rng.uniform(0.0, 0.05, size=jobs)  # overhead that grows with the GPUs: speedups peak
    g = gpus[None, :]
    value = f[:, None] * speed[None, :] * np.maximum(g / (1 + alpha[:, None] * (g - 1)) - beta[:, None] * g, 0.0)
    current = np.where(rng.random(jobs) < 0.5, rng.integers(0, ctype.size, size=jobs), -1)
    disc = np.where(np.arange(ctype.size)[None, :] == current[:, None], 1.0, rng.uniform(0.7, 0.95, (jobs, 1)))
    value = value * np.where(current[:, None] >= 0, disc, 1.0)
    allowed = rng.random(value.shape) < 0.9
    allowed[current >= 0, current[current >= 0]] = True
    prob = SearchProblem(value=value, allowed=allowed, config_type=ctype, config_gpus=gpus, capacities=cap, p=p)
    return prob, current


def one_type(values, gpus=(1, 2, 4), cap=4, p=-1.0) -> SearchProblem:
    v = np.asarray(values, dtype=float)
    return SearchProblem(value=v, allowed=np.ones(v.shape, dtype=bool), config_type=np.zeros(len(gpus), dtype=int),
                         config_gpus=np.asarray(gpus), capacities=np.array([cap]), p=p)


# ------------------------------------------------------------------------------ hand-derived
def test_hand_derived_harmonic_mean():
    """2 jobs, one type of 4 GPUs, configurations {1, 2, 4}.

    A scales linearly (s = 1, 2, 4), B barely (1, 1.1, 1.2); p = -1 minimises
    sum 1/(s + eps). Feasible pairs (A, B) with both allocated and sum of GPUs <= 4:
    (1,1): 1/1.001 + 1/1.001 = 1.998; (1,2): 0.999 + 0.908 = 1.907;
    (2,1): 0.49975 + 0.999 = 1.49875; (2,2): 0.49975 + 0.90826 = 1.40801.
    Leaving a job out costs 1/eps = 1000. Best: (2, 2), harmonic mean 2 / 1.40801 = 1.42044.
    """
    prob = one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]])
    res = exact_search(prob)
    assert res.status == "optimal" and res.method == "exact"
    assert res.choice.tolist() == [1, 1]
    expected = 2.0 / (1 / 2.001 + 1 / 1.101)
    assert res.fitness == pytest.approx(expected, rel=REL)
    assert res.fitness == pytest.approx(1.42044, abs=1e-5)


def test_hand_derived_sum_and_geometric():
    """Same jobs. p = 1 maximises the sum: A on 4 GPUs, B nothing: 4.001 + 0.001 beats
    (2,2) 2.001 + 1.101, so fitness (4.001 + 0.001)/2 = 2.001. p = 0 maximises
    log(s_A + eps) + log(s_B + eps): (2,2) gives log(2.001 * 1.101) = 0.790 against
    (2,1) 0.694 and (4, none) log(4.001 * 0.001) < 0; fitness sqrt(2.001 * 1.101)."""
    res = exact_search(one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]], p=1.0))
    assert res.choice.tolist() == [2, -1]
    assert res.fitness == pytest.approx(2.001, rel=REL)
    res = exact_search(one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]], p=0.0))
    assert res.choice.tolist() == [1, 1]
    assert res.fitness == pytest.approx(math.sqrt(2.001 * 1.101), rel=REL)


def test_fitness_formula():
    prob = one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]])
    assert prob.fitness(np.array([0, -1])) == pytest.approx(2 / (1 / 1.001 + 1 / 0.001), rel=REL)
    assert prob.fitness([2, 0]) == pytest.approx(2 / (1 / 4.001 + 1 / 1.001), rel=REL)
    assert not prob.feasible([2, 0]) and prob.feasible([1, 1]) and prob.feasible([-1, -1])
    assert prob.usage([2, 0]).tolist() == [5]


# ------------------------------------------------------------------------------ exact = brute force
def test_exact_matches_brute_force():
    rng = np.random.default_rng(12345)
    n_checked = 0
    for _ in range(60):
        value, allowed, ctype, gpus, cap, p = random_small(rng)
        prob = SearchProblem(value=value, allowed=allowed, config_type=ctype, config_gpus=gpus, capacities=cap, p=p)
        res = exact_search(prob, mip_gap=0.0)
        assert res.status == "optimal", res.info
        check_feasible(res, prob)
        best = brute_force(value, allowed, ctype, gpus, cap, p)
        assert res.fitness == pytest.approx(best, rel=1e-9), (value, allowed, ctype, gpus, cap, p, res.choice)
        assert res.fitness == pytest.approx(power_mean(np.where(
            res.choice >= 0, np.nan_to_num(value)[np.arange(len(res.choice)), np.maximum(res.choice, 0)], 0.0), p),
            rel=1e-12)
        n_checked += 1
    assert n_checked >= 50


def test_pruning_does_not_change_the_optimum():
    rng = np.random.default_rng(7)
    pruned_any = False
    for i in range(40):
        value, allowed, ctype, gpus, cap, p = random_small(rng)
        prob = SearchProblem(value=value, allowed=allowed, config_type=ctype, config_gpus=gpus, capacities=cap, p=p)
        a = exact_search(prob, mip_gap=0.0)
        b = exact_search(prob, mip_gap=0.0, _prune=False)
        assert a.status == b.status == "optimal"
        assert a.fitness == pytest.approx(b.fitness, rel=1e-9)
        assert b.info["pruned"] == 0 and b.info["columns"] == int(allowed.sum())
        pruned_any |= a.info["pruned"] > 0
    for seed in range(3):
        prob, _ = medium(seed)
        a, b = exact_search(prob, mip_gap=0.0), exact_search(prob, mip_gap=0.0, _prune=False)
        assert a.fitness == pytest.approx(b.fitness, rel=1e-9)
        assert a.info["columns"] < b.info["columns"]
    assert pruned_any


# ------------------------------------------------------------------------------ exact vs genetic
@pytest.mark.parametrize("p", [-1.0, 0.0, 1.0])
def test_exact_at_least_genetic(p):
    for seed in range(4):
        prob, current = medium(seed, jobs=25 + 5 * seed, p=p)
        ex = exact_search(prob, mip_gap=0.0)
        ga = genetic_search(prob, seed=seed, population=40, generations=40, initial=current)
        assert ex.status == "optimal" and ga.status == "feasible" and ga.method == "genetic"
        check_feasible(ex, prob)
        check_feasible(ga, prob)
        assert prob.feasible(ex.choice) and prob.feasible(ga.choice)
        assert prob.fitness(ex.choice) >= prob.fitness(ga.choice) * (1 - 1e-12)
        # the incumbent is a floor
        ex2 = exact_search(prob, mip_gap=0.0, incumbent=ga.choice)
        assert ex2.fitness >= ga.fitness * (1 - 1e-12)


def test_genetic_deterministic_and_improves_on_initial():
    prob, current = medium(3, jobs=30)
    a = genetic_search(prob, seed=5, population=30, generations=30, initial=current)
    b = genetic_search(prob, seed=5, population=30, generations=30, initial=current)
    assert a.choice.tolist() == b.choice.tolist() and a.fitness == b.fitness
    hist = a.info["history"]
    assert len(hist) == 31 and all(y >= x * (1 - 1e-12) for x, y in zip(hist, hist[1:]))
    assert hist[-1] == pytest.approx(a.fitness, rel=1e-9)
    if prob.feasible(current):
        assert a.fitness >= prob.fitness(current) * (1 - 1e-12)
    c = genetic_search(prob, seed=6, population=30, generations=0)
    check_feasible(c, prob)


def test_capacity_never_exceeded_on_random_instances():
    rng = np.random.default_rng(99)
    for i in range(30):
        value, allowed, ctype, gpus, cap, p = random_small(rng)
        prob = SearchProblem(value=value, allowed=allowed, config_type=ctype, config_gpus=gpus, capacities=cap, p=p)
        # an over-full initial assignment: every job on its largest allowed configuration
        init = np.array([int(np.flatnonzero(r)[-1]) if r.any() else -1 for r in allowed])
        for res in (exact_search(prob), genetic_search(prob, seed=i, population=10, generations=10, initial=init)):
            check_feasible(res, prob)


# ------------------------------------------------------------------------------ limits and failures
def big_problem(jobs: int = 400) -> SearchProblem:
    from hetsched.formulations.sia.configurations import (
        configuration_set,
        scaling_factor,
    )
    from hetsched.inputs.cluster import Cluster

    cluster = Cluster.from_servers({"a": 336, "b": 336, "c": 352}, gpus_per_server={"a": 8, "b": 8, "c": 4})
    cs = configuration_set(cluster)
    rng = np.random.default_rng(0)
    f = rng.lognormal(0, 0.5, size=jobs)
    g = np.stack([scaling_factor(cs.gpus, cs.nodes, noise_scale_ratio=float(nu))
                  for nu in rng.lognormal(2, 1, size=jobs)])
    value = f[:, None] * np.array([1.0, 0.6, 0.3])[cs.type_index][None, :] * g
    return SearchProblem(value=value, allowed=np.ones(value.shape, dtype=bool), config_type=cs.type_index,
                         config_gpus=cs.gpus, capacities=cluster.capacities(["a", "b", "c"]))


def test_time_limit_returns_a_feasible_choice():
    prob = big_problem()
    res = exact_search(prob, time_limit=0.05)
    assert res.status in ("time_limit", "optimal"), res.info
    check_feasible(res, prob)
    if res.status == "time_limit" and res.info["source"] == "solver":
        assert res.gap is not None and res.gap >= 0
    # with an incumbent the result never falls below it
    inc = genetic_search(prob, seed=0, population=10, generations=5)
    res = exact_search(prob, time_limit=0.05, incumbent=inc.choice)
    assert res.status in ("time_limit", "optimal")
    check_feasible(res, prob)
    assert res.fitness >= inc.fitness * (1 - 1e-12)


class _FakeBackend:
    def __init__(self, out=None, exc=None):
        self.out, self.exc = out, exc

    def solve(self, lp, *, time_limit=None, options=None):
        if self.exc is not None:
            raise self.exc
        return self.out


def _output(status, x, has_solution, lp_n):
    return SolverOutput(status=status, x=x if x is not None else np.full(lp_n, np.nan), objective=math.nan,
                        has_solution=has_solution, native_status=status, message=f"fake: {status}", solve_s=0.0,
                        backend="fake", mip_gap=0.5 if has_solution else None)


def test_solver_failure_is_reported(monkeypatch):
    prob = one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]])
    monkeypatch.setattr(search_mod, "get_backend", lambda name: _FakeBackend(exc=SolverError("boom")))
    res = exact_search(prob)
    assert res.status == "failed" and res.choice.tolist() == [-1, -1] and "boom" in res.info["message"]
    assert math.isnan(res.fitness)
    monkeypatch.setattr(search_mod, "get_backend",
                        lambda name: _FakeBackend(out=_output("numerical_error", None, False, 6)))
    res = exact_search(prob)
    assert res.status == "failed" and res.choice.tolist() == [-1, -1] and "numerical_error" in res.info["message"]
    # a "solution" that breaks capacity is rejected, never returned
    n = exact_search(one_type([[1.0, 2.0, 4.0], [1.0, 1.1, 1.2]])).info["columns"]
    monkeypatch.setattr(search_mod, "get_backend",
                        lambda name: _FakeBackend(out=_output("optimal", np.ones(n), True, n)))
    res = exact_search(prob)
    assert res.status == "failed" and res.choice.tolist() == [-1, -1] and "rejected" in res.info["message"]
    # stopped without a solution: the incumbent (or nothing) with status time_limit
    monkeypatch.setattr(search_mod, "get_backend",
                        lambda name: _FakeBackend(out=_output("time_limit", None, False, n)))
    res = exact_search(prob, incumbent=[0, 0])
    assert res.status == "time_limit" and res.choice.tolist() == [0, 0] and res.gap is None
    res = exact_search(prob)
    assert res.status == "time_limit" and res.choice.tolist() == [-1, -1]


def test_degenerate_sizes():
    empty = SearchProblem(value=np.zeros((0, 2)), allowed=np.zeros((0, 2), dtype=bool), config_type=[0, 0],
                          config_gpus=[1, 2], capacities=[2])
    res = exact_search(empty)
    assert res.status == "optimal" and res.choice.shape == (0,) and math.isnan(res.fitness)
    assert genetic_search(empty, seed=0, population=4, generations=2).choice.shape == (0,)
    none = SearchProblem(value=np.zeros((3, 0)), allowed=np.zeros((3, 0), dtype=bool), config_type=[],
                         config_gpus=[], capacities=[4])
    for res in (exact_search(none), genetic_search(none, seed=0, population=4, generations=2)):
        assert res.choice.tolist() == [-1, -1, -1]
        assert res.fitness == pytest.approx(EPS)
    zero = one_type([[1.0, 2.0, 4.0]], cap=0)
    assert exact_search(zero).choice.tolist() == [-1]
    assert genetic_search(zero, seed=1, population=4, generations=3).choice.tolist() == [-1]
    worthless = one_type([[0.0, 0.0, 0.0]])
    res = exact_search(worthless)
    assert res.status == "optimal" and res.fitness == pytest.approx(EPS) and res.info["columns"] == 0


# ------------------------------------------------------------------------------ bad input
def _kw(**over):
    base = dict(value=np.ones((2, 3)), allowed=np.ones((2, 3), dtype=bool), config_type=np.array([0, 0, 1]),
                config_gpus=np.array([1, 2, 1]), capacities=np.array([4, 2]))
    base.update(over)
    return base


@pytest.mark.parametrize("over, match", [
    (dict(value=np.ones(3)), r"`value` must have shape"),
    (dict(value=[[1.0, -1.0, 1.0], [1, 1, 1]]),
     r"`value` must be finite and non-negative where `allowed`; job 0, configuration 1 is -1.0"),
    (dict(value=[[1.0, np.nan, 1.0], [1, 1, 1]]), r"`value` must be finite and non-negative"),
    (dict(value=[[1.0, np.inf, 1.0], [1, 1, 1]]), r"`value` must be finite"),
    (dict(allowed=np.ones((2, 2), dtype=bool)), r"`allowed` must have the shape of `value`"),
    (dict(allowed=np.full((2, 3), 0.5)), r"`allowed` must be a boolean array"),
    (dict(config_type=np.array([0, 0, 2])), r"`config_type` must be integers in \[0, 1\]; entry 2 is 2"),
    (dict(config_type=np.array([0, 0])), r"`config_type` must have shape \(n_configs,\)"),
    (dict(config_gpus=np.array([1, 0, 1])), r"`config_gpus` must be positive integers; entry 1 is 0"),
    (dict(config_gpus=np.array([1, 1.5, 1])), r"`config_gpus` must be integers; entry 1 is 1.5"),
    (dict(capacities=np.array([4, -1])), r"`capacities` must be non-negative integers; entry 1 is -1"),
    (dict(capacities=np.array([4, 2.5])), r"`capacities` must be integers; entry 1 is 2.5"),
    (dict(capacities=np.array([True, True])), r"`capacities` must be an array of integers"),
    (dict(p=float("nan")), r"`p` must be a finite number; got nan"),
    (dict(p=float("inf")), r"`p` must be a finite number; got inf"),
    (dict(p="x"), r"`p` must be a finite number"),
    (dict(p=-400.0), r"`p` must keep \(value \+ eps\) \*\* p finite"),
    (dict(eps=0.0), r"`eps` must be a positive finite number; got 0.0"),
])
def test_problem_validation(over, match):
    with pytest.raises(ValidationError, match=match):
        SearchProblem(**_kw(**over))


def test_nan_where_not_allowed_is_fine():
    allowed = np.array([[True, False, True], [True, True, False]])
    value = np.where(allowed, 1.0, np.nan)
    prob = SearchProblem(**_kw(value=value, allowed=allowed))
    assert prob.fitness([0, 1]) == pytest.approx(1.001)
    rule = r"`choice` must be an allowed configuration \(or -1\) for every job; job 0 has 1"
    with pytest.raises(ValidationError, match=rule):
        prob.fitness([1, 1])
    assert not prob.feasible([1, 1])
    assert prob.value.flags.writeable is False


@pytest.mark.parametrize("call, match", [
    (lambda pb: pb.fitness([0]), r"`choice` must have shape \(n_jobs,\) = \(2,\)"),
    (lambda pb: pb.fitness([0, 3]), r"`choice` must be integers in \[-1, 2\]; entry 1 is 3"),
    (lambda pb: pb.feasible([0.5, 0]), r"`choice` must be integers; entry 0 is 0.5"),
    (lambda pb: exact_search(pb, time_limit=0), r"`time_limit` must be a positive finite number of seconds"),
    (lambda pb: exact_search(pb, mip_gap=-1e-3), r"`mip_gap` must be a finite number >= 0"),
    (lambda pb: exact_search(pb, incumbent=[1, 1, 1]), r"`incumbent` must have shape"),
    (lambda pb: exact_search(pb, incumbent=[1, 1]),
     r"`incumbent` must be feasible .* uses 4 GPUs of type 0, which has 3"),
    (lambda pb: exact_search("problem"), r"`problem` must be a hetsched.adaptive.search.SearchProblem; got str"),
    (lambda pb: genetic_search(pb, seed=-1), r"`seed` must be a non-negative integer; got -1"),
    (lambda pb: genetic_search(pb, seed=1.0), r"`seed` must be a non-negative integer; got 1.0"),
    (lambda pb: genetic_search(pb, seed=0, population=1), r"`population` must be an integer >= 2; got 1"),
    (lambda pb: genetic_search(pb, seed=0, generations=-1), r"`generations` must be a non-negative integer"),
    (lambda pb: genetic_search(pb, seed=0, initial=[0, 0, 0]), r"`initial` must have shape"),
])
def test_search_validation(call, match):
    prob = SearchProblem(**_kw(capacities=np.array([3, 2])))
    with pytest.raises(ValidationError, match=match):
        call(prob)


def test_genetic_initial_must_be_allowed_but_may_overflow():
    allowed = np.array([[True, True, False], [True, True, True]])
    prob = SearchProblem(**_kw(allowed=allowed, value=np.where(allowed, 1.0, 0.0), capacities=np.array([2, 1])))
    with pytest.raises(ValidationError, match=r"`initial` must be an allowed configuration"):
        genetic_search(prob, seed=0, initial=[2, 0])
    res = genetic_search(prob, seed=0, population=4, generations=3, initial=[1, 1])  # 4 GPUs of type 0 > 2
    check_feasible(res, prob)
