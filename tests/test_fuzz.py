"""Fuzz suite: random valid instances (benchmarks/fuzz.py's generator) over every registered
policy and every backend that applies. Each result must have a non-spurious status, pass
tests/checker.py and carry ``certificate.ok`` (see benchmarks/fuzz.py for the classification).

Default run: about 400 cases. ``benchmarks/fuzz.py --n N`` runs thousands with the same
generator and writes the counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fuzz  # noqa: E402

POLICIES = hs.list_policies()
SEEDS_AUTO = 16      # per policy, solver="auto", random mode
SEEDS_BACKEND = 3    # per (policy, backend)


def _check(rec: dict) -> None:
    if rec["outcome"] in ("ok", "refused"):
        return
    pytest.fail(f"{rec['outcome']}: policy={rec['policy']} solver={rec['solver']} seed={rec['seed']} "
                f"mode={rec['mode']} status={rec['status']!r}: {rec['detail']}")


@pytest.mark.parametrize("seed", range(SEEDS_AUTO))
@pytest.mark.parametrize("policy", POLICIES)
def test_fuzz_auto(policy: str, seed: int) -> None:
    _check(fuzz.run_case(10_000 + seed, policy))


@pytest.mark.parametrize("mode", fuzz.MODES)
@pytest.mark.parametrize("policy", POLICIES)
def test_fuzz_every_mode(policy: str, mode: str) -> None:
    if mode == "slos" and policy != "max_sum_throughput":
        pytest.skip("SLOs are read by max_sum_throughput only")
    _check(fuzz.run_case(20_000 + fuzz.MODES.index(mode), policy, mode=mode))


@pytest.mark.parametrize("seed", range(SEEDS_BACKEND))
@pytest.mark.parametrize("policy,solver", [(p, b) for p in POLICIES for b in fuzz.backends_for(p)])
def test_fuzz_backends(policy: str, solver: str, seed: int) -> None:
    _check(fuzz.run_case(30_000 + seed, policy, solver))


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31 - 1), policy=st.sampled_from(POLICIES), mode=st.sampled_from(fuzz.MODES))
def test_fuzz_hypothesis(seed: int, policy: str, mode: str) -> None:
    if mode == "slos" and policy != "max_sum_throughput":
        mode = "random"
    _check(fuzz.run_case(seed, policy, mode=mode))


def test_slo_oracle_is_not_vacuous() -> None:
    """The independent SLO check says infeasible for an SLO no job can meet."""
    jobs = hs.JobSet([[1.0], [1.0]], gpu_types=["v100"], steps_remaining=[100.0, 100.0], slos=[100.0, 100.0])
    assert not fuzz._slo_feasible(jobs, hs.Cluster({"v100": 1}))
    assert fuzz._slo_feasible(jobs, hs.Cluster({"v100": 2}))
