"""simulate(): replay a trace through policy -> mechanism -> placement, round after round.

The loop (one iteration per round of ``round_seconds``)::

    admit jobs that have arrived by now
    if the active set changed (or the re-solve period passed): X = hs.solve(policy, active jobs)
    plan  = plan_round_arrays(X, ...)            which job runs on which GPU type
    place = place_plan(cluster, plan, ...)       which servers / GPU ids (optional)
    progress every running job at its throughput for the round
        (unconsolidated throughput when placement spread its gang over servers)
    jobs whose remaining steps fit in the round finish inside it, at the exact time
    t += round_seconds

When no job is active the clock jumps to the next arrival, and the next round starts
there (so a job that arrives at an idle cluster starts at once); a job that arrives while
a round runs waits for the next round boundary, as in Gavel. GPUs a job frees when it
finishes mid-round stay idle until the round ends.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..api import solve, validate_problem
from ..cluster import Cluster
from ..errors import ValidationError, show
from ..formulations.base import Policy, make_policy
from ..formulations.common import isolated_throughput
from ..jobs import JobSet
from ..mechanism import ShareHistory, carve_shares, plan_round_arrays
from ..mechanism.plan import MODES, RULES
from .metrics import package_versions, summarize, window_mask
from .trace import as_trace, generate_workload

__all__ = ["SimulationResult", "simulate"]

log = logging.getLogger(__name__)

_FIELDS = ("steps_remaining", "time_since_start", "slos", "arrival_times", "isolated_time_elapsed")


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """What :func:`simulate` returns.

    Attributes
    ----------
    jobs : DataFrame
        One row per job (index: position in arrival order): ``job_id``, ``job_type``,
        ``scale_factor``, ``arrival``, ``start``, ``finish``, ``jct``, ``queueing_delay``,
        ``total_steps``, ``steps_done``, ``completed``, ``run_seconds``, ``isolated_time``,
        ``ftf``, ``preemptions``, ``migrations``, ``gpu_seconds_<type>``, ``deadline``,
        ``slo_violated``, ``in_window``.
    rounds : DataFrame
        One row per round: ``round``, ``start``, ``seconds``, ``n_active``, ``n_running``,
        ``arrived``, ``completed``, ``solved``, ``solve_ok``, ``solve_status``, ``solve_s``,
        ``solve_jobs``, ``solve_classes``, ``plan_s``, ``place_s``, ``preempted``,
        ``migrated``, ``busy_<type>`` (busy GPU-seconds of the round per type).
    runs : DataFrame or None
        The run log (``record_runs=True``): one row per job and round it ran — ``round``,
        ``job`` (position), ``gpu_type`` (column), ``gpus`` (GPUs held; fractional in the
        ideal mechanism), ``t_start``, ``t_end``, ``steps``, ``spread`` (gang over several
        servers). Enough for an independent conservation check.
    summary : dict
        Aggregates over the measured jobs (see :mod:`hetsched.sim.metrics`).
    config : dict
        Every option the simulation ran with (policy name and parameters, cluster, trace
        source, seed).
    versions : dict
        Python and package versions.
    gpu_types : tuple of str
        Cluster columns.
    capacities : ndarray
        GPUs per type.
    """

    jobs: pd.DataFrame
    rounds: pd.DataFrame
    runs: pd.DataFrame | None
    summary: dict[str, Any]
    config: dict[str, Any]
    versions: dict[str, str]
    gpu_types: tuple[str, ...]
    capacities: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)

    def utilization_over_time(self) -> pd.DataFrame:
        """Per round: ``start`` (s), busy fraction of each type and ``total``."""
        r = self.rounds
        out = pd.DataFrame({"start": r["start"], "seconds": r["seconds"]})
        busy = np.zeros(len(r))
        for k, t in enumerate(self.gpu_types):
            col = r[f"busy_{t}"].to_numpy(dtype=float)
            busy += col
            cap = float(self.capacities[k])
            out[t] = col / (cap * r["seconds"].to_numpy(dtype=float)) if cap > 0 else np.nan
        out["total"] = busy / (float(np.sum(self.capacities)) * r["seconds"].to_numpy(dtype=float))
        return out

    def to_dir(self, path: str | Path, *, runs: bool = False) -> Path:
        """Write ``jobs.csv``, ``rounds.csv`` and ``summary.json`` (summary + config + versions).

        Parameters
        ----------
        path : str or Path
            Directory (created if missing).
        runs : bool, default False
            Also write ``runs.csv`` (the run log).

        Returns
        -------
        Path
            The directory.
        """
        import json

        out = Path(path)
        out.mkdir(parents=True, exist_ok=True)
        self.jobs.to_csv(out / "jobs.csv", index=False)
        self.rounds.to_csv(out / "rounds.csv", index=False)
        if runs and self.runs is not None:
            self.runs.to_csv(out / "runs.csv", index=False)
        doc = dict(_json_clean(self.summary))
        doc["config"] = _json_clean(self.config)
        doc["versions"] = dict(self.versions)
        (out / "summary.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        return out

    @classmethod
    def from_dir(cls, path: str | Path) -> SimulationResult:
        """Read back a result written by :meth:`to_dir` (``runs`` when ``runs.csv`` exists).

        Raises
        ------
        ValidationError
            The directory lacks ``jobs.csv``, ``rounds.csv`` or ``summary.json``.
        """
        import json

        d = Path(path)
        missing = [f for f in ("jobs.csv", "rounds.csv", "summary.json") if not (d / f).is_file()]
        if missing:
            raise ValidationError(f"`path` {str(d)!r} must be a directory written by SimulationResult.to_dir(); missing {missing}.")
        doc = json.loads((d / "summary.json").read_text())
        config = doc.pop("config", {})
        versions = doc.pop("versions", {})
        summary = {k: (math.nan if v is None else v) for k, v in doc.items()}
        cl = config.get("cluster", {})
        runs = pd.read_csv(d / "runs.csv") if (d / "runs.csv").is_file() else None
        return cls(jobs=pd.read_csv(d / "jobs.csv"), rounds=pd.read_csv(d / "rounds.csv", keep_default_na=False,
                                                                         na_values=[""]),
                   runs=runs, summary=summary, config=config, versions=versions, gpu_types=tuple(cl),
                   capacities=np.array([float(v) for v in cl.values()]))

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"SimulationResult(policy={self.config.get('policy')!r}, jobs={s.get('n_jobs')}, "
            f"completed={s.get('n_completed')}, avg_jct={s.get('avg_jct_hours', math.nan):.3g} h, "
            f"makespan={s.get('makespan', math.nan) / 3600:.3g} h, rounds={s.get('n_rounds')}, "
            f"status={s.get('status')!r})"
        )


def _json_clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return repr(value)


# --------------------------------------------------------------------------- helpers
def _check_positive(value: Any, name: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValidationError(f"`{name}` must be a positive number of seconds; got {value!r}.")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValidationError(f"`{name}` must be a positive finite number of seconds; got {value!r}.")
    return v


def _policy_label(pol: Policy) -> str:
    params = pol.params()
    defaults = {}
    try:
        defaults = type(pol)().params()
    except Exception:  # noqa: BLE001 - a policy without defaults
        pass
    changed = {k: v for k, v in params.items() if defaults.get(k, object()) != v}
    if not changed:
        return pol.name
    return pol.name + "(" + ", ".join(f"{k}={v!r}" for k, v in changed.items()) + ")"


def _progress_hook(progress: Any, n_total: int) -> tuple[Callable[[float, int], None] | None, Callable[[], None]]:
    if progress is None or progress is False:
        return None, lambda: None
    if callable(progress):
        return (lambda t, done: progress(t, done, n_total)), (lambda: None)
    if progress is True or progress == "auto":
        if progress == "auto" and not sys.stderr.isatty():
            return None, lambda: None
        try:
            from tqdm import tqdm
        except ImportError:
            log.info("progress bar requested but tqdm is not installed")
            return None, lambda: None
        bar = tqdm(total=n_total, unit="job", desc="simulate", leave=False)
        state = {"done": 0}

        def hook(t: float, done: int) -> None:
            if done > state["done"]:
                bar.update(done - state["done"])
                state["done"] = done
            bar.set_postfix_str(f"t={t / 3600:.1f}h", refresh=False)

        return hook, bar.close
    raise ValidationError(f"`progress` must be None, True, 'auto' or a callable; got {progress!r}.")


# --------------------------------------------------------------------------- simulate
def simulate(
    policy: str | Policy,
    workload: Any,
    cluster: Cluster,
    *,
    round_seconds: float = 360.0,
    mechanism: str = "rounds",
    placement: bool | None = None,
    reallocate: str | float = "on_change",
    window: tuple[float, float] | None = None,
    window_unit: str = "jobs",
    stop_after_window: bool = True,
    seed: int = 0,
    progress: Any = None,
    max_time: float | None = None,
    wall_time_limit: float | None = None,
    solver: str = "auto",
    solve_time_limit: float | None = None,
    solver_options: Mapping[str, Any] | None = None,
    rule: str = "gavel",
    work_conserving: bool = True,
    stickiness: float = 0.0,
    reset_shares: bool = True,
    gpus_per_server: int = 8,
    record_runs: bool = True,
) -> SimulationResult:
    """Replay ``workload`` through ``policy`` on ``cluster``, round by round.

    Parameters
    ----------
    policy : str or Policy
        A registered policy name (``hetsched.list_policies()``) or policy object, e.g.
        ``hetsched.policies.MaxMinFairness(heterogeneity_aware=False)``.
    workload : Trace, JobSet, Workload or Mapping
        The jobs (see :class:`~hetsched.sim.Trace`); a JobSet needs ``steps_remaining``
        (total steps). A mapping is a generator spec passed to
        :func:`~hetsched.sim.generate_workload` with ``seed``, e.g.
        ``{"n_jobs": 200, "rate_per_hour": 2.0}``.
    cluster : Cluster
        GPU counts per type (its GPU types are the simulation's columns); with a topology
        (:meth:`Cluster.from_servers`) placement uses it.
    round_seconds : float, default 360
        Round length (Gavel: 360 s).
    mechanism : {"rounds", "ideal"}, default "rounds"
        "rounds": whole gangs on one type per round (Gavel's mechanism). "ideal": every job
        receives exactly its X each round (fluid; no placement).
    placement : bool, optional
        Map each round onto servers and GPU ids by min-cost flow and progress spread gangs
        at their unconsolidated throughput. Default: on when the cluster has a topology.
        True for a cluster without one cuts it into servers of ``gpus_per_server``.
    reallocate : "on_change" or float, default "on_change"
        Re-solve when the set of active jobs changed (arrival or completion, Gavel's
        behaviour), or every that many seconds (jobs arriving in between get a share carved
        from the current X, :func:`hetsched.mechanism.carve_shares`).
    window : (start, end), optional
        Measured jobs (Gavel's ``-s/-e``): positions in arrival order (``window_unit="jobs"``)
        or arrival times (``"seconds"``). Every job is simulated; the summary covers the
        window.
    window_unit : {"jobs", "seconds"}
    stop_after_window : bool, default True
        With a window, stop once every measured job has finished.
    seed : int, default 0
        Seed of a generated workload; recorded in the result (the loop itself is
        deterministic).
    progress : None, True, "auto" or callable
        Progress bar (tqdm; "auto": only when stderr is a terminal) or a callable
        ``f(sim_time, n_completed, n_total)`` called every round.
    max_time : float, optional
        Stop at this simulated time (workloads that never drain); unfinished jobs have
        ``completed=False``.
    wall_time_limit : float, optional
        Stop after this many wall-clock seconds (status ``"wall_time_limit"``; the result
        then depends on machine speed).
    solver, solve_time_limit, solver_options
        Passed to :func:`hetsched.solve` as ``solver``, ``time_limit`` and ``options``.
    rule, work_conserving, stickiness
        Mechanism options (:func:`hetsched.mechanism.plan_round_arrays`).
    reset_shares : bool, default True
        Forget received shares whenever a new allocation is computed (Gavel).
    gpus_per_server : int, default 8
        Server size used when ``placement=True`` and the cluster has no topology.
    record_runs : bool, default True
        Keep the run log (``result.runs``).

    Returns
    -------
    SimulationResult

    Raises
    ------
    ValidationError
        Bad options; arrivals negative or out of order; a job no GPU type of the cluster
        can run (zero throughput, or a gang larger than every usable type); a window that
        selects no jobs; a policy that needs a job field the trace lacks.

    Examples
    --------
    >>> import hetsched as hs
    >>> from hetsched.sim import simulate
    >>> jobs = hs.JobSet([[2.0, 1.0]], gpu_types=["v100", "k80"], steps_remaining=[7200.0])
    >>> res = simulate("max_min_fairness", jobs, hs.Cluster({"v100": 1, "k80": 1}))
    >>> res.summary["avg_jct"]          # 7200 steps at 2 steps/s on the V100
    3600.0
    """
    wall0 = time.perf_counter()
    pol = make_policy(policy)
    if not isinstance(cluster, Cluster):
        raise ValidationError(f"`cluster` must be a hetsched.Cluster; got {type(cluster).__name__}.")
    if isinstance(workload, Mapping):
        spec = dict(workload)
        if "n_jobs" not in spec or "rate_per_hour" not in spec:
            raise ValidationError(
                f"`workload` as a mapping is a generator spec and needs 'n_jobs' and 'rate_per_hour'; got {sorted(spec)}."
            )
        trace = generate_workload(seed=seed, **spec)
    else:
        trace = as_trace(workload)
    L = _check_positive(round_seconds, "round_seconds")
    if mechanism not in MODES:
        raise ValidationError(f"`mechanism` must be one of {list(MODES)}; got {mechanism!r}.")
    if rule not in RULES:
        raise ValidationError(f"`rule` must be one of {list(RULES)}; got {rule!r}.")
    if isinstance(reallocate, str):
        if reallocate != "on_change":
            raise ValidationError(f"`reallocate` must be 'on_change' or a positive number of seconds; got {reallocate!r}.")
        period = None
    else:
        period = _check_positive(reallocate, "reallocate")
    max_time = _check_positive(max_time, "max_time", allow_none=True)
    wall_time_limit = _check_positive(wall_time_limit, "wall_time_limit", allow_none=True)
    for name, val in (("stop_after_window", stop_after_window), ("reset_shares", reset_shares),
                      ("record_runs", record_runs), ("work_conserving", work_conserving)):
        if not isinstance(val, (bool, np.bool_)):
            raise ValidationError(f"`{name}` must be True or False; got {val!r}.")
    if placement is None:
        use_place = mechanism == "rounds" and cluster.topology is not None
    elif isinstance(placement, (bool, np.bool_)):
        use_place = bool(placement)
        if use_place and mechanism != "rounds":
            raise ValidationError("`placement=True` needs `mechanism='rounds'` (the ideal mechanism has no whole GPUs to place).")
    else:
        raise ValidationError(f"`placement` must be True, False or None; got {placement!r}.")
    place_cluster = cluster
    if use_place and cluster.topology is None:
        place_cluster = Cluster.from_servers(cluster.as_dict(), gpus_per_server=gpus_per_server)
        log.info("placement: cluster has no topology; using servers of %d GPUs", gpus_per_server)

    # ------------------------------------------------------------- the trace's columns
    types = tuple(cluster.gpu_types)
    m = len(types)
    cap = cluster.capacities(types)
    cap_int = cap.astype(np.int64)
    n = trace.n_jobs
    dropped_types = [t for t in trace.gpu_types if t not in types]
    if dropped_types and n:
        log.info("trace GPU types %s are not in the cluster; jobs cannot use them", dropped_types)
    jobs_all = trace.jobs.with_columns(types) if n else trace.jobs
    T = np.array(jobs_all.throughputs, dtype=float) if n else np.zeros((0, m))
    if trace.unconsolidated is not None and n:
        pos = {t: k for k, t in enumerate(trace.gpu_types)}
        U = np.zeros((n, m))
        for k, t in enumerate(types):
            if t in pos:
                U[:, k] = trace.unconsolidated[:, pos[t]]
    else:
        U = None
    ids = trace.jobs.ids
    s = jobs_all.scale_factors.astype(np.int64) if n else np.zeros(0, np.int64)
    weights = jobs_all.weights if n else np.zeros(0)
    arrival = trace.arrival_times.astype(float) if n else np.zeros(0)
    total = trace.total_steps.astype(float) if n else np.zeros(0)
    deadlines = trace.deadlines
    entities = getattr(jobs_all, "entities", None) if n else None
    measured = window_mask(window, arrival, unit=window_unit)

    reads = set(pol.reads) | set(pol.requires)
    if n:
        check_fields: dict[str, Any] = {"steps_remaining": total, "arrival_times": arrival,
                                        "time_since_start": np.zeros(n), "isolated_time_elapsed": np.zeros(n)}
        if deadlines is not None:
            check_fields["slos"] = _slos(deadlines, arrival, L)
        if entities is not None:
            check_fields["entities"] = entities
        check = JobSet(T, gpu_types=types, ids=np.arange(n), scale_factors=s, weights=weights, **check_fields)
        try:
            validate_problem(pol, check, cluster)
        except ValidationError as exc:
            # name the job by its id in the trace, not by its position
            raise type(exc)(_rename_jobs(str(exc), ids)) from None

    config = {
        "policy": _policy_label(pol),
        "policy_name": pol.name,
        "policy_params": pol.params(),
        "cluster": cluster.as_dict(),
        "topology_servers": None if place_cluster.topology is None else int(place_cluster.topology.n_servers),
        "workload": trace.source,
        "workload_meta": dict(trace.meta),
        "n_jobs": n,
        "round_seconds": L,
        "mechanism": mechanism,
        "placement": use_place,
        "reallocate": reallocate,
        "window": None if window is None else [float(window[0]), float(window[1])],
        "window_unit": window_unit,
        "stop_after_window": bool(stop_after_window),
        "seed": seed,
        "max_time": max_time,
        "wall_time_limit": wall_time_limit,
        "solver": solver,
        "solve_time_limit": solve_time_limit,
        "rule": rule,
        "work_conserving": bool(work_conserving),
        "stickiness": float(stickiness),
        "reset_shares": bool(reset_shares),
    }

    # --------------------------------------------------------------------- state
    done = np.zeros(n)
    finish = np.full(n, np.nan)
    start = np.full(n, np.nan)
    iso_time = np.zeros(n)
    iso_rate = np.full(n, np.nan)
    run_seconds = np.zeros(n)
    gpu_sec = np.zeros((n, m))
    preempt = np.zeros(n, np.int64)
    migr = np.zeros(n, np.int64)
    completed = np.zeros(n, dtype=bool)
    remaining_measured = int(measured.sum())

    log_cols: dict[str, list] = {k: [] for k in (
        "round", "start", "seconds", "n_active", "n_running", "arrived", "completed", "solved", "solve_ok",
        "solve_status", "solve_s", "solve_jobs", "solve_classes", "plan_s", "place_s", "preempted", "migrated")}
    busy_log: list[np.ndarray] = []
    runs: dict[str, list[np.ndarray]] = {k: [] for k in ("round", "job", "gpu_type", "gpus", "t_start", "t_end", "steps", "spread")}

    t_policy = t_mech = t_place = 0.0
    history = ShareHistory.empty(types)
    X: np.ndarray | None = None
    x_ids = np.zeros(0, np.int64)  # job positions, the rows of X
    changed = False
    last_solve = -math.inf
    prev_place = None
    active = np.zeros(0, np.int64)
    ptr = 0
    rnd = 0
    t = float(arrival[0]) if n else 0.0
    t_first = t
    status = "drained"
    hook, close = _progress_hook(progress, n)
    n_done = 0
    try:
        while True:
            k_new = int(np.searchsorted(arrival, t, side="right"))
            arrived = k_new - ptr
            if arrived:
                active = np.concatenate([active, np.arange(ptr, k_new, dtype=np.int64)])
                ptr = k_new
                changed = True
            if window is not None and stop_after_window and remaining_measured == 0:
                status = "window_done"
                break
            if active.size == 0:
                if ptr >= n:
                    break
                t = max(t, float(arrival[ptr]))
                continue
            if max_time is not None and t >= max_time:
                status = "max_time"
                break
            if wall_time_limit is not None and time.perf_counter() - wall0 > wall_time_limit:
                status = "wall_time_limit"
                break

            # ------------------------------------------------------ allocation
            solved = False
            solve_ok = True
            solve_status = ""
            solve_s = math.nan
            solve_jobs = solve_classes = 0
            need = X is None or (changed if period is None else (t - last_solve >= period - 1e-9))
            if need:
                t0 = time.perf_counter()
                jobset = _active_jobset(active, T, types, s, weights, total - done, t, arrival, iso_time,
                                        deadlines, L, reads, entities)
                alloc = solve(pol, jobset, cluster, solver=solver, time_limit=solve_time_limit, options=solver_options)
                iso_rate[active] = isolated_throughput(jobset, cap)
                solve_s = time.perf_counter() - t0
                t_policy += solve_s
                solved = True
                solve_status = alloc.status
                solve_jobs = int(alloc.sizes.get("n_jobs", active.size))
                solve_classes = int(alloc.sizes.get("n_classes", active.size))
                last_solve = t
                changed = False
                if "configurations" in alloc.extra:
                    raise ValidationError(
                        f"policy {pol.name!r} chooses a GPU type *and count* per job (configurations); the "
                        "simulator's mechanism runs each job on its fixed gang size and cannot follow it yet."
                    )
                if alloc.has_solution:
                    X = np.clip(np.nan_to_num(alloc.X, nan=0.0), 0.0, None)
                    x_ids = active.copy()
                    if reset_shares:
                        history = history.reset()
                else:
                    solve_ok = False
                    log.warning("t=%.0f s: %s returned %r (%s); keeping the previous allocation",
                                t, pol.name, alloc.status, alloc.message)
                    if X is None:
                        iso = solve("isolated", jobset, cluster)
                        X, x_ids = iso.X, active.copy()
            if not np.array_equal(x_ids, active):
                X, x_ids = _follow(X, x_ids, active, s, T, cap)
            # ------------------------------------------------------ mechanism
            t0 = time.perf_counter()
            plan = plan_round_arrays(
                X, s[active], cap_int, history, job_ids=active, gpu_types=types, round_seconds=L,
                mode=mechanism, rule=rule, stickiness=stickiness, work_conserving=work_conserving,
            )
            t_mech += time.perf_counter() - t0
            rem = total[active] - done[active]
            spread = np.zeros(active.size, dtype=bool)
            place_s = 0.0
            if mechanism == "rounds":
                assign = plan.assignment
                run = assign >= 0
                moved = plan.migrated.copy()
                if use_place and run.any():
                    t0 = time.perf_counter()
                    from ..placement import place_plan

                    pl = place_plan(place_cluster, plan, previous=prev_place, split_large_jobs=True)
                    place_s = time.perf_counter() - t0
                    t_place += place_s
                    prev_place = pl
                    rows = np.flatnonzero(run)
                    placed = pl.placed
                    if not placed.all():
                        lost = rows[~placed]
                        log.info("t=%.0f s: placement left %d planned job(s) unplaced (%s)", t, lost.size,
                                 sorted(set(pl.reason[~placed].tolist())))
                        assign = assign.copy()
                        assign[lost] = -1
                        run = assign >= 0
                        share = np.zeros_like(plan.time_share)
                        share[np.flatnonzero(run), assign[run]] = 1.0
                        plan = dataclasses.replace(plan, assignment=assign, time_share=share)
                    spread[rows] = placed & (pl.servers_used > 1)
                    moved[rows] |= pl.migrated
                rate = np.zeros(active.size)
                jr = active[run]
                if U is not None:
                    rate[run] = np.where(spread[run], U[jr, assign[run]], T[jr, assign[run]])
                else:
                    rate[run] = T[jr, assign[run]]
                share_mat = None
            else:
                share_mat = plan.time_share
                rate = (T[active] * share_mat).sum(axis=1)
                run = rate > 0
                moved = np.zeros(active.size, dtype=bool)
            with np.errstate(divide="ignore", invalid="ignore"):
                fin = run & (rem <= rate * L * (1 + 1e-12))
                dt = np.where(fin, rem / np.where(rate > 0, rate, 1.0), np.where(run, L, 0.0))
            steps = np.where(fin, rem, rate * dt)
            done[active] += steps
            fin_jobs = active[fin]
            done[fin_jobs] = total[fin_jobs]
            finish[fin_jobs] = t + dt[fin]
            completed[fin_jobs] = True
            iso_time[active] += np.where(steps > 0, steps / iso_rate[active], 0.0)
            run_seconds[active] += dt
            first = run & np.isnan(start[active])
            start[active[first]] = t
            preempt[active] += plan.preempted
            migr[active] += moved
            if mechanism == "rounds":
                busy = np.zeros(active.size)
                busy[run] = s[active[run]] * dt[run]
                gpu_sec[active[run], assign[run]] += busy[run]
                busy_type = np.bincount(assign[run], weights=busy[run], minlength=m)
            else:
                contrib = share_mat * (s[active] * dt)[:, None]
                gpu_sec[active] += contrib
                busy_type = contrib.sum(axis=0)
            if record_runs:
                _record_runs(runs, rnd, active, run, mechanism, assign if mechanism == "rounds" else None,
                             share_mat, s, t, dt, steps, spread, T)
            t0 = time.perf_counter()
            history = history.record(plan, L)
            t_mech += time.perf_counter() - t0

            n_fin = int(fin.sum())
            log_cols["round"].append(rnd)
            log_cols["start"].append(t)
            log_cols["seconds"].append(L)
            log_cols["n_active"].append(int(active.size))
            log_cols["n_running"].append(int(run.sum()))
            log_cols["arrived"].append(arrived)
            log_cols["completed"].append(n_fin)
            log_cols["solved"].append(solved)
            log_cols["solve_ok"].append(solve_ok)
            log_cols["solve_status"].append(solve_status)
            log_cols["solve_s"].append(solve_s)
            log_cols["solve_jobs"].append(solve_jobs)
            log_cols["solve_classes"].append(solve_classes)
            log_cols["plan_s"].append(plan.timings.get("plan_s", math.nan))
            log_cols["place_s"].append(place_s)
            log_cols["preempted"].append(int(plan.preempted.sum()))
            log_cols["migrated"].append(int(moved.sum()))
            busy_log.append(busy_type)

            if not run.any() and ptr >= n and not changed:
                status = "stalled"
                log.warning("t=%.0f s: no job can run and none will arrive (%d active job(s) stalled); stopping",
                            t, active.size)
                rnd += 1
                t += L
                break
            if n_fin:
                remaining_measured -= int(measured[fin_jobs].sum())
                active = active[~fin]
                changed = True
                n_done += n_fin
            rnd += 1
            t += L
            if hook is not None:
                hook(t, n_done)
    finally:
        close()

    t_end = t if rnd else t_first
    if n and completed.all():
        t_end = max(float(np.nanmax(finish)), t_first) if rnd else t_first
        # the clock stands at the end of the last round; the span ends at the last finish
    wall = time.perf_counter() - wall0
    timings = {"wall_s": wall, "policy_s": t_policy, "mechanism_s": t_mech, "placement_s": t_place,
               "other_s": max(wall - t_policy - t_mech - t_place, 0.0)}
    rounds_df = pd.DataFrame(log_cols)
    busy_arr = np.array(busy_log).reshape(-1, m)
    for k, tname in enumerate(types):
        rounds_df[f"busy_{tname}"] = busy_arr[:, k]
    jobs_df = _job_frame(trace, ids, s, arrival, start, finish, completed, total, done, run_seconds, iso_time,
                         preempt, migr, gpu_sec, types, deadlines, measured)
    runs_df = None
    if record_runs:
        runs_df = pd.DataFrame({k: (np.concatenate(v) if v else np.zeros(0)) for k, v in runs.items()})
    summary = summarize(jobs_df, rounds_df, gpu_types=types, capacities=cap, span=(t_first, t_end),
                        timings=timings, status=status)
    log.info("simulate %s: %s after %d rounds, %.1f simulated h in %.2f s", config["policy"], status, rnd,
             (t_end - t_first) / 3600, wall)
    return SimulationResult(
        jobs=jobs_df, rounds=rounds_df, runs=runs_df, summary=summary, config=config,
        versions=package_versions(), gpu_types=types, capacities=cap,
        extra={"throughputs": T, "unconsolidated": U},
    )


def _rename_jobs(message: str, ids: np.ndarray) -> str:
    """Replace "job 12" (a position) in a validation message by the trace's job id."""
    import re

    def sub(mt: re.Match) -> str:
        j = int(mt.group(1))
        return f"job {show(ids[j])}" if 0 <= j < ids.shape[0] else mt.group(0)

    return re.sub(r"job (\d+)\b", sub, message)


def _active_jobset(active, T, types, s, weights, remaining, t, arrival, iso_time, deadlines, L, reads,
                   entities=None) -> JobSet:
    fields: dict[str, Any] = {}
    if entities is not None:
        fields["entities"] = entities[active]
    if "steps_remaining" in reads:
        fields["steps_remaining"] = np.maximum(remaining[active], 1e-9)
    if "time_since_start" in reads:
        fields["time_since_start"] = np.maximum(t - arrival[active], 0.0)
    if "arrival_times" in reads:
        fields["arrival_times"] = arrival[active]
    if "isolated_time_elapsed" in reads:
        fields["isolated_time_elapsed"] = iso_time[active]
    if "slos" in reads and deadlines is not None:
        fields["slos"] = _slos(deadlines[active], t, L)
    return JobSet(T[active], gpu_types=types, ids=active, scale_factors=s[active], weights=weights[active], **fields)


#: SLO passed to policies for a job without a deadline (seconds; never binding).
NO_SLO = 1e12


def _slos(deadlines: np.ndarray, now: Any, L: float) -> np.ndarray:
    """Seconds left to each deadline, at least one round; ``NO_SLO`` for jobs without one."""
    left = np.maximum(deadlines - now, L)
    return np.where(np.isfinite(left), left, NO_SLO)


def _follow(X: np.ndarray, x_ids: np.ndarray, active: np.ndarray, s: np.ndarray, T: np.ndarray,
            cap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of X for the active jobs: drop finished jobs, carve shares for new ones."""
    keep = np.isin(x_ids, active)
    Xk, ik = X[keep], x_ids[keep]
    new = active[~np.isin(active, ik)]
    if new.size == 0:
        return Xk, ik
    usable = (T[new] > 0) & (cap[None, :] >= s[new][:, None])
    Xn = carve_shares(Xk, s[ik], cap.astype(np.int64), s[new], new_usable=usable)
    ids = np.concatenate([ik, new])
    order = np.argsort(ids, kind="stable")  # positions are arrival order
    return Xn[order], ids[order]


def _record_runs(runs, rnd, active, run, mechanism, assign, share_mat, s, t, dt, steps, spread, T) -> None:
    if mechanism == "rounds":
        r = np.flatnonzero(run)
        runs["round"].append(np.full(r.size, rnd, np.int64))
        runs["job"].append(active[r])
        runs["gpu_type"].append(assign[r])
        runs["gpus"].append(s[active[r]].astype(float))
        runs["t_start"].append(np.full(r.size, t))
        runs["t_end"].append(t + dt[r])
        runs["steps"].append(steps[r])
        runs["spread"].append(spread[r])
    else:
        jj, kk = np.nonzero(share_mat > 0)
        jj_run = run[jj]
        jj, kk = jj[jj_run], kk[jj_run]
        rate_jk = T[active[jj], kk] * share_mat[jj, kk]
        tot = (T[active] * share_mat).sum(axis=1)
        frac = np.where(tot[jj] > 0, rate_jk / np.where(tot[jj] > 0, tot[jj], 1.0), 0.0)
        runs["round"].append(np.full(jj.size, rnd, np.int64))
        runs["job"].append(active[jj])
        runs["gpu_type"].append(kk)
        runs["gpus"].append(s[active[jj]] * share_mat[jj, kk])
        runs["t_start"].append(np.full(jj.size, t))
        runs["t_end"].append(t + dt[jj])
        runs["steps"].append(steps[jj] * frac)
        runs["spread"].append(np.zeros(jj.size, dtype=bool))


def _job_frame(trace, ids, s, arrival, start, finish, completed, total, done, run_seconds, iso_time, preempt, migr,
               gpu_sec, types, deadlines, measured) -> pd.DataFrame:
    n = ids.shape[0]
    jct = finish - arrival
    with np.errstate(divide="ignore", invalid="ignore"):
        ftf = np.where(completed & (iso_time > 0), jct / iso_time, np.nan)
    dl = deadlines if deadlines is not None else np.full(n, np.inf)
    violated = np.isfinite(dl) & (~completed | (finish > dl))
    data: dict[str, Any] = {
        "job_id": ids,
        "job_type": trace.job_types if trace.job_types is not None else np.full(n, None, dtype=object),
        "scale_factor": s,
        "arrival": arrival,
        "start": start,
        "finish": finish,
        "jct": jct,
        "queueing_delay": start - arrival,
        "total_steps": total,
        "steps_done": done,
        "completed": completed,
        "run_seconds": run_seconds,
        "isolated_time": iso_time,
        "ftf": ftf,
        "preemptions": preempt,
        "migrations": migr,
    }
    for k, t in enumerate(types):
        data[f"gpu_seconds_{t}"] = gpu_sec[:, k] if n else np.zeros(0)
    data["deadline"] = dl
    data["slo_violated"] = violated
    data["in_window"] = measured
    return pd.DataFrame(data)
