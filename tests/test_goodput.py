"""Pollux's goodput model (hetsched.adaptive.goodput): hand-computed values of the step-time
and efficiency formulas, the batch-size search against brute force, the fit of the step-time
model on noiseless samples with known parameters, and the refusal of bad input."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from hetsched.adaptive import goodput as gp
from hetsched.adaptive.goodput import (
    FitResult,
    GoodputModel,
    GradParams,
    PerfParams,
    efficiency,
    fit_perf_params,
    gain,
    iteration_time,
    network_time,
)
from hetsched.errors import ValidationError

# T_acc(m) = 0.1 + 0.01 m; one node: 0.2 + 0.05 (K - 2); several nodes: 0.5 + 0.1 (K - 2).
HAND = dict(alpha_c=0.1, beta_c=0.01, alpha_r=0.2, beta_r=0.05, alpha_n=0.5, beta_n=0.1)


# ------------------------------------------------------------------ statistical efficiency
@pytest.mark.parametrize("sqr, var", [(1.0, 3.0), (0.01, 50.0), (7.0, 0.0), (0.0, 2.0), (0.0, 0.0)])
def test_efficiency_is_exactly_one_at_the_initial_batch(sqr, var):
    g = GradParams(sqr, var)
    assert efficiency(g, 32, 32) == 1.0
    assert gain(g, 32, 32) == 1.0


def test_gain_and_efficiency_hand_computed():
    # scale = 128 / 32 = 4; gain = (3 + 1) / (3 / 4 + 1) = 16 / 7; efficiency = gain / 4 = 4 / 7.
    g = GradParams(sqr=1.0, var=3.0)
    assert gain(g, 32, 128) == pytest.approx(16 / 7, rel=1e-15)
    assert efficiency(g, 32, 128) == pytest.approx(4 / 7, rel=1e-15)
    # below M0: scale = 1/2, gain = 4 / (6 + 1) = 4/7, efficiency = 8/7 > 1.
    assert efficiency(g, 32, 16) == pytest.approx(8 / 7, rel=1e-15)


def test_efficiency_decreases_in_the_batch_size():
    batches = np.geomspace(8, 65536, 200)
    for sqr, var in [(1.0, 3.0), (0.01, 100.0), (5.0, 0.5)]:
        eff = efficiency(GradParams(sqr, var), 64, batches)
        assert eff.shape == batches.shape
        assert np.all(np.diff(eff) < 0)
        # gain grows with the batch but never beyond the batch ratio (efficiency <= 1 above M0)
        g = gain(GradParams(sqr, var), 64, batches)
        assert np.all(np.diff(g) > 0)
        assert np.all(eff[batches >= 64] <= 1.0)


def test_degenerate_gradient_statistics():
    m = np.array([32.0, 64.0, 320.0])
    # nothing measured (both 0) or noise only (sqr 0): perfect scaling, efficiency 1
    for g in (GradParams(0.0, 0.0), GradParams(0.0, 4.0)):
        assert np.array_equal(efficiency(g, 32, m), np.ones(3))
        assert np.allclose(gain(g, 32, m), m / 32, rtol=1e-15)
    # no noise (var 0): a larger batch makes no more progress per iteration
    assert np.allclose(gain(GradParams(2.0, 0.0), 32, m), 1.0)
    assert np.allclose(efficiency(GradParams(2.0, 0.0), 32, m), 32 / m)


# ------------------------------------------------------------------------- step time
def test_iteration_time_without_overlap_is_compute_plus_network():
    p = PerfParams(**HAND, gamma=1.0)
    # m = 10: T_acc = 0.2. One node, K = 4: T_net = 0.2 + 0.05 * 2 = 0.3.
    assert iteration_time(p, 1, 4, 10) == pytest.approx(0.5, rel=1e-12)
    # K = 2: no retrogression term, T_net = alpha_r = 0.2.
    assert iteration_time(p, 1, 2, 10) == pytest.approx(0.4, rel=1e-12)
    # two nodes, K = 4: inter-node parameters, T_net = 0.5 + 0.1 * 2 = 0.7.
    assert iteration_time(p, 2, 4, 10) == pytest.approx(0.9, rel=1e-12)
    # four nodes, K = 16: T_net = 0.5 + 0.1 * 14 = 1.9; m = 30: T_acc = 0.4.
    assert iteration_time(p, 4, 16, 30) == pytest.approx(2.3, rel=1e-12)


def test_network_time_hand_values():
    p = PerfParams(**HAND, gamma=1.0)
    out = network_time(p, [1, 1, 1, 2, 4], [1, 2, 8, 2, 16])
    assert out[0] == pytest.approx(1e-8)
    assert out[1:] == pytest.approx([0.2, 0.2 + 0.05 * 6, 0.5, 0.5 + 0.1 * 14], rel=1e-12)


def test_single_replica_has_negligible_network_time():
    for gamma in (1.0, 2.0, 7.5):
        p = PerfParams(**HAND, gamma=gamma)
        t_acc = 0.1 + 0.01 * np.array([1.0, 16.0, 512.0])
        t = iteration_time(p, 1, 1, [1, 16, 512])
        assert np.all(t >= t_acc)
        assert np.allclose(t, t_acc, rtol=1e-7, atol=0)


def test_overlap_exponent():
    # gamma = 2: sqrt(0.2^2 + 0.3^2); large gamma: close to max(T_acc, T_net) = 0.3.
    assert iteration_time(PerfParams(**HAND, gamma=2.0), 1, 4, 10) == pytest.approx(math.sqrt(0.13), rel=1e-12)
    t10 = float(iteration_time(PerfParams(**HAND, gamma=10.0), 1, 4, 10))
    assert t10 == pytest.approx((0.2 ** 10 + 0.3 ** 10) ** 0.1, rel=1e-12)
    assert 0.3 < t10 < 0.3 * 1.002  # (1 + (2/3)^10)^(1/10) = 1.0017...


def test_accumulation_steps_add_compute_time():
    p = PerfParams(**HAND, gamma=1.0)
    # s = 3 local steps of 0.2 s before the synchronising step of 0.5 s.
    assert iteration_time(p, 1, 4, 10, 3) == pytest.approx(3 * 0.2 + 0.5, rel=1e-12)
    p2 = PerfParams(**HAND, gamma=3.0)
    base = iteration_time(p2, 2, 8, 24)
    assert iteration_time(p2, 2, 8, 24, 5) == pytest.approx(base + 5 * (0.1 + 0.24), rel=1e-12)


def test_iteration_time_broadcasts():
    p = PerfParams(**HAND, gamma=1.5)
    out = iteration_time(p, np.array([[1], [2]]), np.array([[2, 4, 8]]), np.array([16, 32, 64]))
    assert out.shape == (2, 3)
    assert out[1, 2] == pytest.approx(float(iteration_time(p, 2, 8, 64)))


def test_throughput_goodput_and_progress_rate_agree_with_the_formulas():
    p = PerfParams(**HAND, gamma=1.0)
    g = GradParams(sqr=1.0, var=3.0)
    model = GoodputModel(p, g, init_batch_size=32)
    # K = 4, m = 8, s = 3: M = 128, T_iter = 3 * 0.18 + (0.18 + 0.3) = 1.02.
    assert model.throughput(1, 4, 8, 3) == pytest.approx(128 / 1.02, rel=1e-12)
    assert model.goodput(1, 4, 8, 3) == pytest.approx(128 / 1.02 * 4 / 7, rel=1e-12)
    assert model.progress_rate(1, 4, 8, 3) == pytest.approx(16 / 7 / 1.02, rel=1e-12)
    # at M0 the efficiency is 1: goodput == throughput, progress rate == 1 / T_iter
    assert model.goodput(1, 4, 8) == pytest.approx(float(model.throughput(1, 4, 8)), rel=1e-15)
    assert model.progress_rate(1, 4, 8) == pytest.approx(1 / float(iteration_time(p, 1, 4, 8)), rel=1e-15)


def test_perf_params_array_round_trip():
    p = PerfParams(**HAND, gamma=2.5)
    arr = p.as_array()
    assert arr.tolist() == [0.1, 0.01, 0.2, 0.05, 0.5, 0.1, 2.5]
    assert PerfParams.from_array(arr) == p


# ------------------------------------------------------------------------ optimize
def random_model(rng: np.random.Generator) -> GoodputModel:
    perf = PerfParams(alpha_c=rng.uniform(0.01, 0.2), beta_c=10 ** rng.uniform(-4, -2.5),
                      alpha_r=10 ** rng.uniform(-2.5, -1), beta_r=10 ** rng.uniform(-4, -2.5),
                      alpha_n=10 ** rng.uniform(-2, -0.5), beta_n=10 ** rng.uniform(-3.5, -2),
                      gamma=rng.uniform(1.0, 4.0))
    grad = GradParams(sqr=10 ** rng.uniform(-1, 1), var=10 ** rng.uniform(-1, 3))
    return GoodputModel(perf, grad, int(rng.choice([16, 32, 64, 128])))


def brute_force(model, nodes, replicas, max_bsz, amin, amax, accumulation):
    """Best goodput over every (atomic, accum) with M0 <= K * atomic * (accum + 1) <= max."""
    atomic = np.arange(amin, amax + 1)[:, None]
    steps = np.arange(max_bsz // (replicas * amin) if accumulation else 1)[None, :]
    total = replicas * atomic * (steps + 1)
    ok = (total >= model.init_batch_size) & (total <= max_bsz)
    if not ok.any():
        return 0.0
    return float(np.max(np.where(ok, model.goodput(nodes, replicas, atomic, steps), 0.0)))


def test_optimize_matches_brute_force_over_every_feasible_configuration():
    rng = np.random.default_rng(20210714)
    placements = [(1, 1), (1, 2), (1, 3), (1, 4), (2, 6), (2, 8), (4, 16), (8, 32)]
    gaps = []
    for _ in range(40):
        model = random_model(rng)
        m0 = model.init_batch_size
        max_bsz = int(m0 * rng.choice([1, 4, 16, 64]))
        amin, amax = int(rng.choice([1, 8, 16])), int(rng.choice([32, 64, 128]))
        accumulation = bool(rng.integers(2))
        nodes, replicas = map(np.array, zip(*placements))
        good, atomic, steps = model.optimize(nodes, replicas, max_batch_size=max_bsz,
                                             atomic_bsz_range=(amin, amax), accumulation=accumulation)
        assert atomic.dtype == np.int64 and steps.dtype == np.int64
        for i, (n, k) in enumerate(placements):
            best = brute_force(model, n, k, max_bsz, amin, amax, accumulation)
            if best == 0.0:
                assert (good[i], atomic[i], steps[i]) == (0.0, 0, 0)
                continue
            # the returned configuration is feasible and its goodput is what was reported
            total = k * atomic[i] * (steps[i] + 1)
            assert amin <= atomic[i] <= amax and m0 <= total <= max_bsz
            assert accumulation or steps[i] == 0
            assert good[i] == pytest.approx(float(model.goodput(n, k, atomic[i], steps[i])), rel=1e-12)
            # never above the brute-force optimum (it is feasible), and at most 1% below it:
            # between its geometric candidates the search is approximate
            assert good[i] <= best * (1 + 1e-12)
            gaps.append(1 - good[i] / best)
    assert len(gaps) > 150
    assert max(gaps) < 0.01


def test_optimize_is_never_worse_than_the_initial_batch():
    rng = np.random.default_rng(7)
    for _ in range(20):
        model = random_model(rng)
        m0 = model.init_batch_size
        for n, k in [(1, 1), (1, 2), (1, 4), (2, 8)]:
            if m0 % k or m0 // k < 1:
                continue
            g, _, _ = model.optimize(n, k, max_batch_size=64 * m0, atomic_bsz_range=(1, m0 // k))
            assert g >= float(model.goodput(n, k, m0 // k)) * (1 - 1e-12)


def test_optimize_infeasible_configurations_get_zero():
    model = GoodputModel(PerfParams(**HAND, gamma=1.0), GradParams(1.0, 3.0), 32)
    # K * atomic_min = 16 * 8 = 128 > max_batch_size = 64: nothing fits
    good, atomic, steps = model.optimize([1, 4], [2, 16], max_batch_size=64, atomic_bsz_range=(8, 32))
    assert good[1] == 0.0 and atomic[1] == 0 and steps[1] == 0
    assert good[0] > 0 and 2 * atomic[0] * (steps[0] + 1) >= 32  # at least M0
    # without accumulation M0 = 32 > K * atomic_max = 1 * 16 is out of reach
    good, atomic, steps = model.optimize(1, 1, max_batch_size=256, atomic_bsz_range=(4, 16), accumulation=False)
    assert (float(good), int(atomic), int(steps)) == (0.0, 0, 0)
    # ... and with accumulation it is reached by accumulating
    good, atomic, steps = model.optimize(1, 1, max_batch_size=256, atomic_bsz_range=(4, 16))
    assert good > 0 and atomic * (steps + 1) >= 32 and steps >= 1


def test_optimize_vectorised_over_500_jobs_worth_of_placements():
    rng = np.random.default_rng(3)
    model = GoodputModel(PerfParams(**HAND, gamma=2.0), GradParams(0.5, 40.0), 64)
    nodes = rng.integers(1, 5, size=500)
    replicas = nodes * rng.integers(1, 5, size=500)
    good, atomic, steps = model.optimize(nodes, replicas, max_batch_size=4096, atomic_bsz_range=(16, 128))
    assert good.shape == atomic.shape == steps.shape == (500,)
    assert np.all(good > 0) and np.all(atomic >= 16) and np.all(replicas * atomic * (steps + 1) <= 4096)
    good2, atomic2, _ = model.optimize(nodes.reshape(50, 10), replicas.reshape(50, 10), max_batch_size=4096,
                                       atomic_bsz_range=(16, 128))
    assert good2.shape == (50, 10) and np.array_equal(good2.ravel(), good)
    g0, a0, s0 = model.optimize(2, 8, max_batch_size=4096, atomic_bsz_range=(16, 128))
    assert g0.shape == a0.shape == s0.shape == ()


# ----------------------------------------------------------------------------- fit
def physical_samples(atomic=(16, 32, 64, 128), node_counts=(1, 2, 4), gpus_per_node=4):
    rows = [(n, k, m) for n in node_counts for k in (1, 2, 4, 8, 16) if n <= k <= gpus_per_node * n for m in atomic]
    return tuple(np.array(col) for col in zip(*rows))


def samples_from(perf, nodes, replicas, atomic):
    compute = perf.alpha_c + perf.beta_c * atomic
    return compute, iteration_time(perf, nodes, replicas, atomic)


@pytest.mark.parametrize("truth", [
    PerfParams(0.05, 0.002, 0.04, 0.004, 0.2, 0.02, 2.0),
    PerfParams(0.12, 0.0005, 0.01, 0.001, 0.08, 0.01, 1.2),
    PerfParams(0.03, 0.004, 0.05, 0.002, 0.3, 0.05, 3.0),
])
def test_fit_recovers_known_parameters_from_noiseless_samples(truth):
    nodes, replicas, atomic = physical_samples()
    compute, step = samples_from(truth, nodes, replicas, atomic)
    res = fit_perf_params(nodes, replicas, atomic, compute, step)
    assert isinstance(res, FitResult) and res.success and res.n_samples == nodes.size
    assert res.rmsle < 0.01
    p = res.params
    assert p.alpha_c == pytest.approx(truth.alpha_c, rel=0.02)
    assert p.beta_c == pytest.approx(truth.beta_c, rel=0.02)
    assert np.allclose(iteration_time(p, nodes, replicas, atomic), step, rtol=0.01)
    assert np.allclose(p.alpha_c + p.beta_c * atomic, compute, rtol=0.01)
    # also away from the samples: other atomic batches and accumulation
    assert np.allclose(iteration_time(p, nodes, replicas, 3 * atomic, 2),
                       iteration_time(truth, nodes, replicas, 3 * atomic, 2), rtol=0.01)


def test_fit_with_measurement_noise_stays_close():
    truth = PerfParams(0.05, 0.002, 0.04, 0.004, 0.2, 0.02, 2.0)
    nodes, replicas, atomic = (np.tile(a, 3) for a in physical_samples())
    compute, step = samples_from(truth, nodes, replicas, atomic)
    rng = np.random.default_rng(11)
    res = fit_perf_params(nodes, replicas, atomic, compute * np.exp(rng.normal(0, 0.02, compute.size)),
                          step * np.exp(rng.normal(0, 0.02, step.size)))
    assert res.success
    assert 0.01 < res.rmsle < 0.04  # about the 2% noise
    assert np.allclose(iteration_time(res.params, nodes, replicas, atomic), step, rtol=0.05)


def test_fit_single_atomic_batch_fixes_alpha_c():
    truth = PerfParams(0.05, 0.002, 0.04, 0.004, 0.2, 0.02, 2.0)
    nodes, replicas, atomic = physical_samples(atomic=(32,))
    compute, step = samples_from(truth, nodes, replicas, atomic)
    res = fit_perf_params(nodes, replicas, atomic, compute, step)
    assert res.success and "alpha_c" in res.message
    assert res.params.alpha_c == pytest.approx(float(np.mean(compute)) / 2, rel=1e-12)
    # beta_c is fitted: the compute time at the measured batch is still right
    assert res.params.alpha_c + res.params.beta_c * 32 == pytest.approx(compute[0], rel=1e-3)


def test_fit_single_node_only_assumes_a_slower_inter_node_network():
    truth = PerfParams(0.05, 0.002, 0.04, 0.004, 0.2, 0.02, 2.0)
    nodes, replicas, atomic = physical_samples(node_counts=(1,))
    assert set(replicas.tolist()) == {1, 2, 4}
    compute, step = samples_from(truth, nodes, replicas, atomic)
    res = fit_perf_params(nodes, replicas, atomic, compute, step)
    p = res.params
    assert res.success and "alpha_n" in res.message and "beta_n" in res.message
    assert p.alpha_n >= 1.1 * p.alpha_r * (1 - 1e-12) and p.beta_n >= 1.1 * p.beta_r * (1 - 1e-12)
    assert np.allclose(iteration_time(p, nodes, replicas, atomic), step, rtol=0.01)
    # the prior: the same replicas over two nodes are predicted no faster than on one
    assert np.all(iteration_time(p, 2, 4, atomic) >= iteration_time(p, 1, 4, atomic))


def test_fit_unidentifiable_network_terms_stay_at_the_lower_bound():
    truth = PerfParams(0.05, 0.002, 0.04, 0.004, 0.2, 0.02, 2.0)
    # replicas <= 2 only, on one node: beta_r, beta_n not identified (nor alpha_n)
    nodes, replicas, atomic = np.ones(6, int), np.array([1, 2] * 3), np.repeat([16, 32, 64], 2)
    compute, step = samples_from(truth, nodes, replicas, atomic)
    res = fit_perf_params(nodes, replicas, atomic, compute, step)
    assert res.success
    assert res.params.beta_r == pytest.approx(gp.FIT_LOWER, rel=1e-9)
    assert np.allclose(iteration_time(res.params, nodes, replicas, atomic), step, rtol=0.01)
    # multi-node samples only: the intra-node terms are not identified
    nodes, replicas, atomic = np.array([2, 2, 4, 4]), np.array([4, 8, 8, 16]), np.array([32, 64, 32, 64])
    compute, step = samples_from(truth, nodes, replicas, atomic)
    res = fit_perf_params(nodes, replicas, atomic, compute, step)
    assert res.params.alpha_r == pytest.approx(gp.FIT_LOWER, rel=1e-9)
    assert res.params.beta_r == pytest.approx(gp.FIT_LOWER, rel=1e-9)
    assert np.allclose(iteration_time(res.params, nodes, replicas, atomic), step, rtol=0.01)


def test_fit_reports_non_convergence(monkeypatch, caplog):
    import scipy.optimize

    real = scipy.optimize.minimize   # the fit imports it when it runs (not at module import)

    def failing(*args, **kwargs):
        out = real(*args, **kwargs)
        out.success, out.message = False, "STOP: forced by the test"
        return out

    monkeypatch.setattr(scipy.optimize, "minimize", failing)
    nodes, replicas, atomic = physical_samples()
    compute, step = samples_from(PerfParams(**HAND, gamma=1.5), nodes, replicas, atomic)
    with caplog.at_level(logging.WARNING, logger=gp.__name__):
        res = fit_perf_params(nodes, replicas, atomic, compute, step)
    assert not res.success and "forced by the test" in res.message
    assert any("did not converge" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------- bad input
def test_bad_model_input_is_refused():
    p = PerfParams(**HAND, gamma=1.0)
    with pytest.raises(ValidationError, match=r"`replicas` must be positive integers; position 3 has 0"):
        iteration_time(p, 1, [1, 2, 4, 0], 16)
    with pytest.raises(ValidationError, match=r"`nodes` must be <= `replicas`.*position 1"):
        network_time(p, [1, 4], [2, 2])
    with pytest.raises(ValidationError, match=r"`atomic_bsz` must be positive"):
        iteration_time(p, 1, 1, [16, -1])
    with pytest.raises(ValidationError, match=r"`accum_steps` must be non-negative integers"):
        iteration_time(p, 1, 1, 16, [0, 1.5])
    with pytest.raises(ValidationError, match=r"`nodes` must be numeric"):
        network_time(p, "2", 4)
    with pytest.raises(ValidationError, match=r"`gamma` must be a number in \[1, 10\]"):
        PerfParams(**HAND, gamma=0.5)
    with pytest.raises(ValidationError, match=r"`beta_r` must be"):
        PerfParams(**{**HAND, "beta_r": float("nan")}, gamma=1.0)
    with pytest.raises(ValidationError, match=r"`var` must be a finite number >= 0; got -1"):
        GradParams(1.0, -1.0)
    with pytest.raises(ValidationError, match=r"`init_batch_size` must be a positive integer"):
        GoodputModel(p, GradParams(1.0, 1.0), 0)
    with pytest.raises(ValidationError, match=r"`batch_size` must be positive"):
        efficiency(GradParams(1.0, 1.0), 32, [64, 0])


def test_bad_optimize_input_is_refused():
    model = GoodputModel(PerfParams(**HAND, gamma=1.0), GradParams(1.0, 3.0), 32)
    with pytest.raises(ValidationError, match=r"`atomic_bsz_range`"):
        model.optimize(1, 2, max_batch_size=256, atomic_bsz_range=(0, 8))
    with pytest.raises(ValidationError, match=r"`atomic_bsz_range`"):
        model.optimize(1, 2, max_batch_size=256, atomic_bsz_range=(16, 8))
    with pytest.raises(ValidationError, match=r"`max_batch_size` must be an integer >= init_batch_size = 32"):
        model.optimize(1, 2, max_batch_size=16, atomic_bsz_range=(1, 8))
    with pytest.raises(ValidationError, match=r"`accumulation` must be True or False"):
        model.optimize(1, 2, max_batch_size=256, atomic_bsz_range=(1, 8), accumulation=1)
    with pytest.raises(ValidationError, match=r"`nodes` must be <= `replicas`"):
        model.optimize(4, 2, max_batch_size=256, atomic_bsz_range=(1, 8))


def test_bad_fit_input_is_refused():
    ok = dict(nodes=[1, 1, 2], replicas=[1, 2, 4], atomic_bsz=[16, 32, 16], compute_time=[0.1, 0.2, 0.1],
              step_time=[0.1, 0.3, 0.4])
    cases = [
        (dict(replicas=[1, 2]), r"`replicas` must have the length of `nodes` \(3\); got 2"),
        (dict(step_time=[0.1, -0.3, 0.4]), r"`step_time` must be positive finite numbers; position 1 has -0.3"),
        (dict(compute_time=[0.1, float("inf"), 0.1]), r"`compute_time` must be positive finite numbers; position 1"),
        (dict(atomic_bsz=[16, 32.5, 16]), r"`atomic_bsz` must be positive integers; position 1 has 32.5"),
        (dict(nodes=[1, 3, 2]), r"`nodes` must be <= `replicas`.*position 1"),
        (dict(nodes=[], replicas=[], atomic_bsz=[], compute_time=[], step_time=[]), r"`nodes` must be a non-empty"),
    ]
    for change, message in cases:
        with pytest.raises(ValidationError, match=message):
            fit_perf_params(**{**ok, **change})


def test_optimize_many_equals_each_models_optimize() -> None:
    """The batched evaluation (one numpy pass over models x configurations) gives, row by row,
    what each model's own optimize gives (an independent path: one model at a time), including
    configurations whose per-GPU limit makes them unrunnable (goodput 0)."""
    from hetsched.adaptive.goodput import optimize_many

    rng = np.random.default_rng(11)
    nodes = np.array([1, 1, 1, 2, 4])
    replicas = np.array([1, 2, 4, 8, 16])
    models, lo, hi, max_b = [], [], [], []
    for _ in range(12):
        perf = PerfParams(*(rng.uniform(0.01, 0.2, 6)), gamma=float(rng.uniform(1.0, 3.0)))
        grad = GradParams(float(rng.uniform(0.1, 5.0)), float(rng.choice([0.0, rng.uniform(0.1, 50.0)])))
        m0 = int(rng.integers(16, 128))
        models.append(GoodputModel(perf, grad, m0))
        lo.append(int(rng.integers(4, 16)))
        hi.append(rng.integers(0, 64, size=replicas.size))   # some below lo: not runnable
        max_b.append(int(m0 * rng.integers(1, 40)))
    g, a, s = optimize_many(models, nodes, replicas, max_batch_size=np.array(max_b),
                            atomic_bsz_range=(np.array(lo), np.array(hi)))
    assert g.shape == a.shape == s.shape == (12, 5)
    for j, m in enumerate(models):
        for c in range(replicas.size):
            if hi[j][c] < lo[j]:
                assert g[j, c] == 0.0 and a[j, c] == 0 and s[j, c] == 0
                continue
            gj, aj, sj = m.optimize(nodes[c], replicas[c], max_batch_size=max_b[j],
                                    atomic_bsz_range=(lo[j], int(hi[j][c])))
            assert g[j, c] == pytest.approx(float(gj), rel=1e-12) and a[j, c] == int(aj) and s[j, c] == int(sj)
    with pytest.raises(ValidationError, match="max_batch_size"):
        optimize_many(models[:1], nodes, replicas, max_batch_size=np.array([1]), atomic_bsz_range=(np.array([4]),
                      np.full((1, 5), 8)))
