"""Tests of hetsched.inputs.workloads: job mixes sampled from catalogues, random jobs, arrivals."""

from __future__ import annotations

import doctest
import math
from pathlib import Path

import numpy as np
import pytest

import hetsched.inputs.workloads as wl_mod
from hetsched.errors import ValidationError
from hetsched.inputs.jobs import JobSet
from hetsched.inputs.throughputs import ThroughputCatalogue, generate_catalogue, load_gavel_throughputs
from hetsched.inputs.workloads import (
    DEFAULT_SCALE_FACTOR_PROBS,
    Workload,
    poisson_arrivals,
    random_jobs,
    sample_durations,
    sample_jobs,
)

GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"

SHORT_MIN, SPLIT, LONG_MAX = 60 * 10**1.5, 60 * 10**3.0, 60 * 10**4.0


def _tol(p: float, n: int, z: float = 5.0) -> float:
    """z standard errors of a binomial proportion (z = 5: a false alarm about once in 3.5 million)."""
    return z * math.sqrt(p * (1 - p) / n)


@pytest.fixture(scope="module")
def catalogue() -> ThroughputCatalogue:
    return generate_catalogue(seed=0)


def test_doctests() -> None:
    result = doctest.testmod(wl_mod)
    assert result.failed == 0 and result.attempted > 0


class TestSampleJobs:
    def test_structure(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 500, seed=3)
        assert isinstance(w, Workload) and isinstance(w.jobs, JobSet) and len(w) == 500
        assert w.jobs.ids[:3].tolist() == ["j0", "j1", "j2"] and w.jobs.ids[-1] == "j499"
        assert w.jobs.gpu_types == catalogue.gpu_types
        np.testing.assert_array_equal(w.jobs.throughputs, catalogue.throughputs[w.rows])
        np.testing.assert_array_equal(w.jobs.scale_factors, catalogue.scale_factors[w.rows])
        np.testing.assert_array_equal(w.job_types, catalogue.job_types[w.rows])
        assert w.jobs.has("steps_remaining") and not w.jobs.has("arrival_times")
        df = w.to_frame()
        assert list(df.columns[:1]) == ["job_type"] and len(df) == 500

    def test_deterministic(self, catalogue: ThroughputCatalogue) -> None:
        a = sample_jobs(catalogue, 1000, seed=11, arrival_rate_per_hour=30.0)
        b = sample_jobs(catalogue, 1000, seed=np.random.default_rng(11), arrival_rate_per_hour=30.0)
        c = sample_jobs(catalogue, 1000, seed=12, arrival_rate_per_hour=30.0)
        np.testing.assert_array_equal(a.rows, b.rows)
        np.testing.assert_array_equal(a.jobs.steps_remaining, b.jobs.steps_remaining)
        np.testing.assert_array_equal(a.jobs.arrival_times, b.jobs.arrival_times)
        assert not np.array_equal(a.rows, c.rows)

    def test_scale_factor_mix(self, catalogue: ThroughputCatalogue) -> None:
        n = 100_000
        w = sample_jobs(catalogue, n, seed=0, with_steps=False, id_prefix=None)
        for s, p in DEFAULT_SCALE_FACTOR_PROBS.items():
            freq = np.mean(w.jobs.scale_factors == s)
            assert abs(freq - p) <= _tol(p, n), (s, freq)
        # job types uniform within each scale factor (26 types)
        ones = w.job_types[w.jobs.scale_factors == 1]
        _, counts = np.unique(ones, return_counts=True)
        assert len(counts) == 26
        q = 1 / 26
        assert np.abs(counts / len(ones) - q).max() <= _tol(q, len(ones))

    def test_mix_restricted_to_catalogue_and_renormalized(self) -> None:
        cat = generate_catalogue(n_job_types=5, scale_factors=(1, 2), seed=0)
        n = 50_000
        w = sample_jobs(cat, n, seed=1, with_steps=False)
        p1 = 0.70 / 0.80
        assert set(np.unique(w.jobs.scale_factors)) == {1, 2}
        assert abs(np.mean(w.jobs.scale_factors == 1) - p1) <= _tol(p1, n)
        # a mapping can name other scale factors
        w3 = sample_jobs(cat, 1000, seed=1, scale_factor_probs={2: 1.0})
        assert (w3.jobs.scale_factors == 2).all()

    def test_durations(self, catalogue: ThroughputCatalogue) -> None:
        n = 100_000
        w = sample_jobs(catalogue, n, seed=5, with_steps=False, id_prefix=None)
        d = w.durations
        assert d.min() >= SHORT_MIN and d.max() <= LONG_MAX
        long_frac = np.mean(d > SPLIT)
        assert abs(long_frac - 0.2) <= _tol(0.2, n)
        # log10(minutes) of short jobs is U(1.5, 3): mean 2.25, sd 1.5/sqrt(12)
        short = np.log10(d[d <= SPLIT] / 60)
        assert abs(short.mean() - 2.25) <= 5 * (1.5 / math.sqrt(12)) / math.sqrt(short.size)

    def test_steps_rule(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 2000, seed=9)
        v100 = catalogue.gpu_types.index("v100")
        expected = np.ceil(w.durations * catalogue.throughputs[w.rows, v100])
        np.testing.assert_array_equal(w.jobs.steps_remaining, expected)  # default reference = fastest = v100
        wk = sample_jobs(catalogue, 2000, seed=9, reference_gpu_type="k80")
        k80 = catalogue.gpu_types.index("k80")
        np.testing.assert_array_equal(wk.jobs.steps_remaining, np.ceil(wk.durations * catalogue.throughputs[wk.rows, k80]))

    def test_zero_reference_falls_back_and_unrunnable_rows_skipped(self) -> None:
        cat = ThroughputCatalogue(
            ["a", "b", "c"], [1, 1, 1], ["v100", "k80"],
            [[0.0, 2.0], [4.0, 1.0], [0.0, 0.0]],
        )
        w = sample_jobs(cat, 3000, seed=0, reference_gpu_type="v100")
        assert 2 not in set(w.rows.tolist())  # row "c" can run nowhere
        a = w.rows == 0
        np.testing.assert_array_equal(w.jobs.steps_remaining[a], np.ceil(w.durations[a] * 2.0))

    def test_unconsolidated_table(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 300, seed=2, consolidated=False)
        np.testing.assert_array_equal(w.jobs.throughputs, catalogue.unconsolidated[w.rows])
        no_u = ThroughputCatalogue(["a"], [1], ["v100"], [[1.0]])
        with pytest.raises(ValidationError, match="consolidated=False"):
            sample_jobs(no_u, 3, seed=0, consolidated=False)

    def test_arrivals_field(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 100, seed=2, arrival_rate_per_hour=10.0)
        t = w.jobs.arrival_times
        assert (np.diff(t) >= 0).all() and t[0] > 0

    def test_integer_ids_and_empty(self, catalogue: ThroughputCatalogue) -> None:
        assert sample_jobs(catalogue, 4, seed=0, id_prefix=None).jobs.ids.tolist() == [0, 1, 2, 3]
        assert len(sample_jobs(catalogue, 0, seed=0)) == 0

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"n_jobs": -1}, "n_jobs"),
            ({"seed": "x"}, "seed"),
            ({"scale_factor_probs": (0.5, 0.5, 0.5, 0.5)}, "sum to 1"),
            ({"scale_factor_probs": (1.0, 0.0)}, "length 4"),
            ({"scale_factor_probs": {16: 1.0}}, "no positive probability"),
            ({"scale_factor_probs": {1: -0.5, 2: 1.5}}, r"scale_factor_probs\[1\]"),
            ({"reference_gpu_type": "a100"}, "reference_gpu_type"),
            ({"long_job_prob": 2.0}, "long_job_prob"),
            ({"arrival_rate_per_hour": 0.0}, "rate_per_hour"),
        ],
    )
    def test_bad_arguments(self, catalogue: ThroughputCatalogue, kwargs: dict, match: str) -> None:
        args = {"n_jobs": 10, "seed": 0}
        args.update(kwargs)
        n = args.pop("n_jobs")
        with pytest.raises(ValidationError, match=match):
            sample_jobs(catalogue, n, **args)

    def test_not_a_catalogue(self) -> None:
        with pytest.raises(ValidationError, match="catalogue"):
            sample_jobs({"v100": 1}, 3, seed=0)  # type: ignore[arg-type]

    @pytest.mark.skipif(not GAVEL_PATH.is_file(), reason="Gavel's throughput table not present")
    def test_on_gavel_table(self) -> None:
        cat = load_gavel_throughputs(GAVEL_PATH)
        n = 20_000
        w = sample_jobs(cat, n, seed=0)
        # every sampled job's (type, scale factor) is a row of the file; single-GPU-only
        # types (e.g. A3C) appear only with scale factor 1
        multi = {jt for jt, s in zip(cat.job_types, cat.scale_factors) if s > 1}
        assert all(jt in multi for jt in w.job_types[w.jobs.scale_factors > 1])
        for s, p in DEFAULT_SCALE_FACTOR_PROBS.items():
            assert abs(np.mean(w.jobs.scale_factors == s) - p) <= _tol(p, n)
        assert (w.jobs.steps_remaining > 0).all()


class TestDurationsAndArrivals:
    def test_sample_durations_bounds(self) -> None:
        d = sample_durations(10_000, 0)
        assert d.min() >= SHORT_MIN and d.max() <= LONG_MAX
        assert (sample_durations(1000, 0, long_job_prob=0.0) <= SPLIT).all()
        assert (sample_durations(1000, 0, long_job_prob=1.0) >= SPLIT).all()

    def test_poisson_arrivals(self) -> None:
        n, rate = 200_000, 12.0
        t = poisson_arrivals(n, rate, 0, start=100.0)
        gaps = np.diff(np.concatenate([[100.0], t]))
        assert (gaps >= 0).all()
        mean_gap = 3600 / rate  # exponential: sd = mean
        assert abs(gaps.mean() - mean_gap) <= 5 * mean_gap / math.sqrt(n)
        np.testing.assert_array_equal(t, poisson_arrivals(n, rate, np.random.default_rng(0), start=100.0))
        assert poisson_arrivals(0, 1.0, 0).shape == (0,)
        with pytest.raises(ValidationError, match="rate_per_hour"):
            poisson_arrivals(3, -1.0, 0)
        with pytest.raises(ValidationError, match="`n`"):
            poisson_arrivals(-3, 1.0, 0)


class TestRandomJobs:
    def test_shapes_and_determinism(self) -> None:
        a = random_jobs(50, ["x", "y", "z"], seed=4)
        b = random_jobs(50, ["x", "y", "z"], seed=4)
        np.testing.assert_array_equal(a.throughputs, b.throughputs)
        assert a.throughputs.shape == (50, 3) and (a.throughputs > 0).all()
        assert a.ids[0] == "j0" and a.has("steps_remaining")
        c = random_jobs(5, 2, seed=0, with_steps=False)
        assert c.gpu_types == ("gpu0", "gpu1") and not c.has("steps_remaining")

    def test_zero_prob(self) -> None:
        n = 20_000
        jobs = random_jobs(n, 4, seed=1, zero_prob=0.5)
        T = jobs.throughputs
        assert ((T > 0).sum(axis=1) >= 1).all()
        # P(entry is 0) = 0.5 - P(row all zero) / 4 restored = 0.5 - 0.0625/4
        p = 0.5 - 0.0625 / 4
        assert abs(np.mean(T == 0) - p) <= _tol(p, 4 * n)
        all_zero_prob = random_jobs(10, 3, seed=0, zero_prob=1.0).throughputs
        assert ((all_zero_prob > 0).sum(axis=1) == 1).all()

    @pytest.mark.parametrize(
        "kwargs, match",
        [({"zero_prob": -0.1}, "zero_prob"), ({"sigma": -1.0}, "sigma"), ({"gpu_types": 0}, "gpu_types"),
         ({"gpu_types": "v100"}, "gpu_types")],
    )
    def test_bad_arguments(self, kwargs: dict, match: str) -> None:
        args = {"gpu_types": 2}
        args.update(kwargs)
        with pytest.raises(ValidationError, match=match):
            random_jobs(3, seed=0, **args)


class TestOneContainer:
    """Issue 24: one workload container for samples, generated and read traces."""

    def test_trace_is_workload(self, catalogue: ThroughputCatalogue) -> None:
        import hetsched as hs
        from hetsched.inputs.trace import Trace

        assert Workload is Trace is hs.Trace is hs.Workload is hs.sim.Trace
        tr = hs.generate_workload(6, rate_per_hour=4.0, seed=0, catalogue=catalogue)
        assert isinstance(tr, Workload) and tr.source == "generated"
        assert tr.rows is tr.catalogue_rows and tr.durations.shape == (6,)
        assert {"job_type", "catalogue_row", "duration_s"} <= set(tr.to_frame().columns)
        head = tr.head(2)
        assert head.n_jobs == 2 and head.durations.tolist() == tr.durations[:2].tolist()
        assert head.rows.tolist() == tr.rows[:2].tolist()

    def test_sample_is_a_workload_with_its_catalogue(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 20, seed=1, arrival_rate_per_hour=5.0)
        assert w.catalogue is catalogue and w.source == "workload" and w.unconsolidated is None
        assert w.for_simulation() is w
        with pytest.raises(AttributeError):
            w.rows = np.zeros(20, dtype=np.int64)  # type: ignore[misc]

    def test_simulation_rules_are_checked_by_for_simulation(self, catalogue: ThroughputCatalogue) -> None:
        w = sample_jobs(catalogue, 5, seed=0, with_steps=False)  # a workload, not yet one to simulate
        assert len(w) == 5
        with pytest.raises(ValidationError, match=r"must carry `steps_remaining`"):
            w.for_simulation()
        jobs = JobSet([[1.0]] * 2, gpu_types=["v100"], ids=["a", "b"], steps_remaining=[1.0, 1.0],
                      arrival_times=[5.0, 1.0])
        with pytest.raises(ValidationError, match=r"non-decreasing.*job 'b' \(row 1\)"):
            Workload(jobs).for_simulation()

    @pytest.mark.parametrize("kwargs, match", [
        ({"job_types": ["x"]}, r"`job_types` must have length n_jobs = 2; got 1"),
        ({"durations": [1.0, -1.0]}, r"`durations` must be finite and non-negative; job 'b'"),
        ({"durations": [1.0]}, r"`durations`"),
        ({"catalogue_rows": np.array([0, 1])}, r"`catalogue` and `catalogue_rows` must be given together"),
        ({"deadlines": [0.0, 9.0]}, r"`deadlines` must be later than the job's arrival"),
    ])
    def test_bad_fields(self, kwargs: dict, match: str) -> None:
        jobs = JobSet([[1.0]] * 2, gpu_types=["v100"], ids=["a", "b"])
        with pytest.raises(ValidationError, match=match):
            Workload(jobs, **kwargs)
