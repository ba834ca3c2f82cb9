"""sweep() and Partitioned on real engines: a local Ray and a Dask LocalCluster with worker
processes, against the serial run; the main-module guard of the default process pools.

Ray and Dask come with the ``ray`` and ``dask`` extras, which ``python3 dev.py test``
installs; each engine starts once per module (Ray's start-up takes seconds).
"""

from __future__ import annotations

import concurrent.futures as cf
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.executors import RayExecutor
from hetsched.api import Partitioned
from hetsched.sim.sweep import TIMING_COLUMNS

from checker import check_allocation

GRID = {
    "policy": ["max_min_fairness", "fifo"],
    "load": [6.0],
    "seed": [0, 1],
    "n_jobs": 8,
    "long_job_prob": 0.0,
    "cluster": hs.Cluster({"v100": 4, "k80": 4}),
}
JOBS = hs.random_jobs(60, ["v100", "p100", "k80"], seed=3)
CLUSTER = hs.Cluster({"v100": 7, "p100": 5, "k80": 9})
K = 3


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in TIMING_COLUMNS if c in df]).reset_index(drop=True)


def pop(executor: cf.Executor) -> hs.Allocation:
    return hs.solve(Partitioned(policy=hs.policies.MaxMinFairness(), k=K, seed=1, executor=executor), JOBS, CLUSTER)


@pytest.fixture(scope="module")
def serial_sweep() -> pd.DataFrame:
    return hs.sweep(GRID, max_workers=1)


@pytest.fixture(scope="module")
def serial_pop() -> hs.Allocation:
    with cf.ThreadPoolExecutor(max_workers=1) as ex:  # one thread: the sub-problems one after another
        return pop(ex)


@pytest.fixture(scope="module")
def ray_executor():
    ray = pytest.importorskip("ray", reason='Ray is not installed: pip install "hetsched[ray]"')
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield RayExecutor()
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def dask_executor():
    distributed = pytest.importorskip("distributed", reason='Dask is not installed: pip install "hetsched[dask]"')
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as lc, \
            distributed.Client(lc) as client:
        yield client.get_executor()


ENGINES = ["ray_executor", "dask_executor"]


@pytest.mark.parametrize("engine", ENGINES)
def test_sweep_on_engine_equals_serial(engine, serial_sweep, request):
    df = hs.sweep(GRID, request.getfixturevalue(engine))
    assert (df["error"] == "").all(), df["error"].tolist()
    assert len(df) == 4 and (df["n_completed"] == 8).all()
    pd.testing.assert_frame_equal(stable(serial_sweep), stable(df))


@pytest.mark.parametrize("engine", ENGINES)
def test_partitioned_on_engine_equals_serial(engine, serial_pop, request):
    ex = request.getfixturevalue(engine)
    res = pop(ex)
    assert res.status == "optimal" and serial_pop.status == "optimal"
    assert res.extra["executor"] == type(ex).__name__
    assert len(res.extra["subproblem_seconds"]) == K
    np.testing.assert_array_equal(res.X, serial_pop.X)
    assert res.objective == serial_pop.objective
    assert check_allocation(res.X, JOBS.throughputs, JOBS.scale_factors, CLUSTER.capacities(JOBS.gpu_types)) == []


@pytest.mark.parametrize("engine", ENGINES)
def test_error_in_a_worker_keeps_its_class(engine, request):
    """A ValidationError raised inside a remote sub-problem (HiGHS rejects the option there)
    comes back as a ValidationError naming the sub-problem, on both engines."""
    ex = request.getfixturevalue(engine)
    with pytest.raises(ValidationError, match=r"sub-problem 0 of k=3: .*no_such_option") as info:
        hs.solve(Partitioned(policy="max_min_fairness", k=K, seed=1, executor=ex), JOBS, CLUSTER, solver="highs",
                 options={"no_such_option": 1})
    assert type(info.value) is ValidationError


def test_ray_executor_rules(ray_executor):
    with pytest.raises(ValidationError, match="`task_cpus` must be a positive finite number; got 0"):
        RayExecutor(task_cpus=0)
    with pytest.raises(ValidationError, match="`task_cpus`.*got nan"):
        RayExecutor(task_cpus=float("nan"))
    with pytest.raises(ValidationError, match="`task_cpus`.*got True"):
        RayExecutor(task_cpus=True)
    with pytest.raises(ValidationError, match="already initialised"):
        RayExecutor("ray://elsewhere:10001")
    with pytest.raises(ValidationError, match="already initialised"):
        RayExecutor(num_cpus=4)
    ex = RayExecutor()
    assert ex.submit(pow, 2, 10).result(timeout=60) == 1024
    ex.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        ex.submit(pow, 2, 10)
    # the executor did not start Ray, so its shutdown leaves Ray running for the others
    assert ray_executor.submit(pow, 3, 3).result(timeout=60) == 27


# ------------------------------------------------------------------ the main-module guard
UNGUARDED_POP = """
import hetsched as hs
from hetsched.api import Partitioned
jobs = hs.random_jobs(40, ["v100", "k80"], seed=0)
res = hs.solve(Partitioned(policy="max_min_fairness", k=2, seed=0), jobs, hs.Cluster({"v100": 6, "k80": 6}))
print("STATUS", res.status)
"""

UNGUARDED_SWEEP = """
import multiprocessing
import hetsched as hs
multiprocessing.set_start_method("spawn", force=True)    # macOS/Windows default; Linux's is fork
grid = {"policy": ["max_min_fairness", "fifo"], "load": [4.0], "n_jobs": 4, "seed": 0,
        "cluster": hs.Cluster({"v100": 2, "k80": 2})}
print("ERRORS", hs.sweep(grid, max_workers=2)["error"].tolist())
"""


def run_script(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, check=False)


def test_unguarded_partitioned_script_fails_fast_naming_the_rule(tmp_path):
    out = run_script(tmp_path, UNGUARDED_POP)
    assert out.returncode != 0
    assert "MainModuleGuardError" in out.stderr and 'if __name__ == "__main__":' in out.stderr
    # the parent's own error points at the same rule
    assert "SolverError" in out.stderr and "A worker process died" in out.stderr
    assert "STATUS" not in out.stdout


def test_guarded_partitioned_script_runs(tmp_path):
    guarded = UNGUARDED_POP.replace("\njobs", "\nif __name__ == '__main__':\n    jobs").replace("\nres", "\n    res") \
        .replace("\nprint", "\n    print")
    out = run_script(tmp_path, guarded)
    assert out.returncode == 0, out.stderr
    assert "STATUS optimal" in out.stdout and "MainModuleGuardError" not in out.stderr


def test_unguarded_sweep_script_reports_the_rule(tmp_path):
    out = run_script(tmp_path, UNGUARDED_SWEEP)
    assert "MainModuleGuardError" in out.stderr and 'if __name__ == "__main__":' in out.stderr
    parent = [line for line in out.stdout.splitlines() if line.startswith("ERRORS")]
    # workers printed nothing (they stopped at sweep()); the parent got both runs as errors
    assert len(parent) == 1
    assert parent[0].count("BrokenProcessPool") == 2 and "__main__" in parent[0]
