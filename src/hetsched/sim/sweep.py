"""sweep(): many simulations (policies x loads x seeds x clusters ...) through an Executor.

Every run is a pure function of its parameters (the workload is generated inside the run
from ``load`` and ``seed``), so results do not depend on which executor ran them or in
which order: the returned frame is sorted by the grid, and only the wall-clock timing
columns (:data:`TIMING_COLUMNS`) differ between executors.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import itertools
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ..errors import HetschedError, ValidationError
from ..executors import broken_pool_hint, process_pool
from ..formulations.base import make_policy
from ..inputs.cluster import Cluster
from ..inputs.trace import Trace, generate_workload
from ..rounds.loop import scheduler_label
from ..validation import check_int, check_mapping, fail
from .options import SimOptions, make_options
from .simulator import simulate

__all__ = ["TIMING_COLUMNS", "expand_grid", "run_one", "sweep"]

log = logging.getLogger(__name__)

#: Columns that measure wall-clock time and so differ from run to run.
TIMING_COLUMNS = ("wall_s", "policy_s", "mechanism_s", "placement_s", "other_s", "sim_hours_per_wall_s",
                  "rounds_per_wall_s", "solver_s_total", "solver_s_mean", "solver_s_max", "run_wall_s")

#: Grid keys that describe the generated workload (everything else goes to simulate()).
WORKLOAD_KEYS = ("n_jobs", "load", "scale_factor_probs", "long_job_prob", "catalogue", "gpu_types",
                 "slo_factors", "reference_gpu_type", "workload")

#: Grid keys passed to simulate(): every SimOptions field the sweep does not set itself, and a preset.
_SIM_KEYS = tuple(f.name for f in dataclasses.fields(SimOptions) if f.name not in ("seed", "progress", "record_runs")) \
    + ("preset",)


def _cluster_label(c: Cluster) -> str:
    return ",".join(f"{t}={n}" for t, n in c.as_dict().items())


def _axis(key: str, value: Any) -> list[tuple[Any, Any]] | None:
    """(label, value) pairs when ``value`` is an axis, else None."""
    if key in ("policy", "cluster") and isinstance(value, Mapping) and not (
        key == "cluster" and all(isinstance(v, (int, np.integer)) for v in value.values())
    ):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, list):
        out = []
        for v in value:
            if key == "policy":
                pol = make_policy(v)
                out.append((scheduler_label(pol), pol))
            elif key == "cluster":
                c = v if isinstance(v, Cluster) else Cluster(v)
                out.append((_cluster_label(c), c))
            elif key == "workload" and isinstance(v, Trace):
                out.append((v.source, v))
            else:
                out.append((v, v))
        return out
    return None


def expand_grid(grid: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runs of a grid: the product of its axes, in order.

    Parameters
    ----------
    grid : Mapping
        ``policy`` (name, Policy, list of them, or mapping label -> policy), ``load``
        (arrival rate, jobs/hour), ``seed``, ``cluster`` (Cluster, mapping of counts,
        list, or mapping label -> cluster), ``n_jobs``, a fixed ``workload`` (a Trace,
        instead of ``load``/``n_jobs``), any field of :class:`SimOptions` or ``preset``, and
        any keyword of :func:`generate_workload`. Every ``list`` value is an axis; other values
        (including tuples such as ``window``) are the same in every run.

    Returns
    -------
    list of dict
        One dict per run with ``"labels"`` (axis name -> label) and ``"params"``.

    Raises
    ------
    ValidationError
        Unknown keys, missing ``policy`` or ``cluster``, or neither ``load`` nor ``workload``.
    """
    check_mapping(grid, "grid", rule="a mapping of parameter -> value or list of values")
    known = {"policy", "cluster", "seed"} | set(WORKLOAD_KEYS) | set(_SIM_KEYS)
    unknown = sorted(set(grid) - known)
    if unknown:
        raise ValidationError(f"`grid` has unknown keys {unknown}; known: {sorted(known)}.")
    for req in ("policy", "cluster"):
        if req not in grid:
            raise ValidationError(f"`grid` must give {req!r}.")
    if "load" not in grid and "workload" not in grid:
        raise ValidationError("`grid` must give 'load' (jobs/hour, with 'n_jobs') or a fixed 'workload' (a Trace).")
    if "load" in grid and "n_jobs" not in grid:
        raise ValidationError("`grid` with 'load' must give 'n_jobs' (jobs per generated workload).")
    axes: list[tuple[str, list[tuple[Any, Any]]]] = []
    fixed: dict[str, Any] = {}
    for key, value in grid.items():
        pairs = _axis(key, value)
        if pairs is None:
            if key == "policy":
                pol = make_policy(value)
                fixed[key] = pol
            elif key == "cluster":
                fixed[key] = value if isinstance(value, Cluster) else Cluster(value)
            else:
                fixed[key] = value
        else:
            if not pairs:
                raise ValidationError(f"`grid[{key!r}]` is an empty list; an axis needs at least one value.")
            axes.append((key, pairs))
    runs = []
    for combo in itertools.product(*[pairs for _, pairs in axes]):
        params = dict(fixed)
        labels: dict[str, Any] = {}
        for (key, _), (label, value) in zip(axes, combo):
            params[key] = value
            labels[key] = label
        for key in ("policy", "cluster"):
            if key not in labels:
                labels[key] = scheduler_label(params[key]) if key == "policy" else _cluster_label(params[key])
        for key in ("load", "seed", "n_jobs"):
            if key not in labels and key in params:
                labels[key] = params[key]
        params.setdefault("seed", 0)
        labels.setdefault("seed", params["seed"])
        runs.append({"labels": labels, "params": params})
    return runs


def run_one(params: Mapping[str, Any]) -> dict[str, Any]:
    """One run of a sweep: generate (or take) the workload, simulate, return the summary.

    A :class:`~hetsched.errors.HetschedError` is returned in the ``error`` column instead of
    stopping the sweep.
    """
    t0 = time.perf_counter()
    p = dict(params)
    seed = int(p.pop("seed", 0))
    try:
        if "workload" in p:
            trace = p.pop("workload")
            for k in ("load", "n_jobs"):
                p.pop(k, None)
        else:
            gen_kw = {k: p.pop(k) for k in ("scale_factor_probs", "long_job_prob", "catalogue", "gpu_types",
                                            "slo_factors", "reference_gpu_type") if k in p}
            trace = generate_workload(int(p.pop("n_jobs")), rate_per_hour=float(p.pop("load")), seed=seed,
                                      cluster=p["cluster"], **gen_kw)
        policy = p.pop("policy")
        cluster = p.pop("cluster")
        opts = make_options(preset=p.pop("preset", None), seed=seed, record_runs=False, **p)
        res = simulate(policy, trace, cluster, options=opts)
        row = dict(res.summary)
        row["error"] = ""
    except HetschedError as exc:
        row = {"error": f"{type(exc).__name__}: {exc}"}
    row["run_wall_s"] = time.perf_counter() - t0
    return row


def sweep(
    grid: Mapping[str, Any],
    executor: cf.Executor | None = None,
    *,
    max_workers: int | None = None,
    progress: Any = None,
) -> pd.DataFrame:
    """Run every combination of ``grid`` and return one tidy DataFrame, one row per run.

    Parameters
    ----------
    grid : Mapping
        See :func:`expand_grid`. Example::

            {"policy": {"het-aware": MaxMinFairness(),
                        "agnostic": MaxMinFairness(heterogeneity_aware=False)},
             "load": [1.0, 2.0, 3.0], "seed": [0, 1], "n_jobs": 500,
             "cluster": Cluster({"v100": 36, "p100": 36, "k80": 36}),
             "window": (100, 400), "wall_time_limit": 300}
    executor : concurrent.futures.Executor, optional
        Where runs execute: any Executor (a ``ThreadPoolExecutor``, Dask's
        ``Client.get_executor()``, :class:`hetsched.executors.RayExecutor`...). Default: a
        ``ProcessPoolExecutor`` with ``max_workers`` (default: the CPU count), shut down at
        the end. An executor you pass is not shut down. With the default pool, a script
        must call ``sweep`` under ``if __name__ == "__main__":`` (with the spawn or
        forkserver start method workers import the script again; calling ``sweep`` while a
        worker imports it raises :class:`~hetsched.errors.MainModuleGuardError`).
    max_workers : int, optional
        Workers of the default process pool; 1 runs in this process (no pool).
    progress : None, True or callable
        tqdm bar over runs (True), or ``f(n_done, n_total)``.

    Returns
    -------
    DataFrame
        Columns: ``run``, the grid's axis labels (``policy``, ``cluster``, ``load``,
        ``seed``, ...), every summary metric of :func:`simulate`, ``error`` (empty when the
        run succeeded, else ``"ExceptionType: message"``) and ``run_wall_s``. A run that
        raises (any exception, in this process or in a worker) or whose worker dies (a
        ``BrokenProcessPool`` fails every run not yet finished) gets its error there; the
        other runs are kept. Rows in grid order. Per-run time limits: put
        ``wall_time_limit`` (wall seconds) or ``max_time`` (simulated seconds) in the grid.

    Examples
    --------
    >>> import hetsched as hs
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> grid = {"policy": ["max_min_fairness", "fifo"], "load": [4.0], "n_jobs": 10, "seed": 0,
    ...         "cluster": hs.Cluster({"v100": 4, "k80": 4})}
    >>> with ThreadPoolExecutor(2) as ex:
    ...     df = sweep(grid, ex)
    >>> df[["policy", "load", "n_completed"]].values.tolist()
    [['max_min_fairness', 4.0, 10], ['fifo', 4.0, 10]]
    """
    check_int(max_workers, "max_workers", low=1, allow_none=True)
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise fail("progress", "None, True, False or a callable", progress)
    runs = expand_grid(grid)
    n = len(runs)
    own = None
    if executor is None and (max_workers is None or max_workers > 1) and n > 1:
        workers = max_workers or os.cpu_count() or 1
        own = executor = process_pool(min(workers, n), what="sweep")
    elif executor is not None and not isinstance(executor, cf.Executor):
        raise ValidationError(f"`executor` must be a concurrent.futures.Executor or None; got {type(executor).__name__}.")
    bar = None
    if progress is True:
        try:
            from tqdm import tqdm

            bar = tqdm(total=n, unit="run", desc="sweep", leave=False)
        except ImportError:  # tqdm is a dependency; say so rather than show nothing
            log.warning("sweep: a progress bar was asked for but tqdm is not installed (pip install tqdm)")
            bar = None
    results: list[dict[str, Any] | None] = [None] * n
    done = 0
    try:
        if executor is None:
            for i, r in enumerate(runs):
                try:
                    results[i] = run_one(r["params"])
                except Exception as exc:
                    results[i] = _failed(i, exc, "raised")
                done += 1
                _tick(bar, progress, done, n)
        else:
            futures: dict[cf.Future, int] = {}
            for i, r in enumerate(runs):
                try:
                    futures[executor.submit(run_one, r["params"])] = i
                except Exception as exc:
                    results[i] = _failed(i, exc, "could not be submitted to the executor")
                    done += 1
                    _tick(bar, progress, done, n)
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:
                    results[i] = _failed(i, exc, "failed in the executor")
                done += 1
                _tick(bar, progress, done, n)
    finally:
        if bar is not None:
            bar.close()
        if own is not None:
            own.shutdown()
    rows = []
    for i, (r, res) in enumerate(zip(runs, results)):
        row = {"run": i}
        row.update(r["labels"])
        row.update(res or {})
        rows.append(row)
    df = pd.DataFrame(rows)
    if "error" in df and (df["error"] != "").any():
        log.warning("sweep: %d of %d runs failed", int((df["error"] != "").sum()), n)
    return df


def _failed(i: int, exc: BaseException, what: str) -> dict[str, Any]:
    """The row of a run that did not return: its error (type and message) in ``error``."""
    text = (str(exc) or repr(exc)) + broken_pool_hint(exc)
    log.warning("sweep: run %d %s: %s: %s", i, what, type(exc).__name__, text)
    log.debug("sweep: run %d traceback", i, exc_info=exc)
    return {"error": f"{type(exc).__name__}: {text}"}


def _tick(bar, progress, done: int, n: int) -> None:
    if bar is not None:
        bar.update(1)
    elif callable(progress):
        progress(done, n)
