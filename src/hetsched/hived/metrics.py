r"""The sharing anomaly and fragmentation, measured on a simulation result (HiveD, Zhao et
al., OSDI 2020, §2 "sharing anomaly" and §5 "queuing delay").

Sharing anomaly
---------------
A tenant of a shared cluster should never do worse than in a private cluster of its own
cells. In round :math:`r`, a waiting guaranteed job :math:`j` of tenant :math:`v` suffers the
anomaly when, on some type :math:`t` it can use, the cell requests of the guaranteed jobs
:math:`v` runs on :math:`t` in that round plus :math:`j`'s own request fit :math:`v`'s virtual
cells of type :math:`t` (:func:`~hetsched.hived.cells.chain_fits`: exact for the divisible
cell sizes): in its private cluster the job would have run, so it waits only because of
how the *shared* cluster is used. Its anomaly delay is the sum of the lengths of those
rounds; a job's request is the one of :meth:`~hetsched.hived.scheduler.Setup.request` (a
cell of the lowest level that holds its gang, or whole servers).

The measure reads only the result's run log (``record_runs=True``), the workload's
entities, throughputs and gang sizes, and the tenant file: it knows nothing of the
scheduler, so the quota baseline and HiveD are measured by the same rule. Under HiveD it
is zero by construction (its admission is this test, in arrival order, and a subset of
requests that fit still fits); under quotas, a job within quota that finds no server with
enough free GPUs adds to it.

Fragmentation
-------------
Per round, type and level, the share of free GPUs that no free cell of the level holds
(:func:`~hetsched.hived.common.fragmentation`), logged in the scheduler's state
(``HiveDState.fragmentation_frame``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import ValidationError
from .cells import chain_fits
from .common import GUARANTEED, HiveDState, with_job_priority
from .tenants import PRIORITIES

__all__ = ["anomaly_delay", "tenant_metrics"]


def anomaly_delay(result: Any, setup: Any, entities: Any, *, job_class: Any = None) -> pd.DataFrame:
    """Per job, the sharing-anomaly delay (seconds) of a simulation (module docstring).

    Parameters
    ----------
    result : SimulationResult
        Run with ``record_runs=True``.
    setup : Setup
        The scheduler's setup on the result's cluster (``sched.setup(cluster)``): cells,
        tenants, quotas.
    entities : array-like
        Tenant name of each job (the workload's entities, in the result's job order).
    job_class : array-like, optional
        0 (guaranteed) / 1 (opportunistic) per job; default: every job guaranteed.

    Returns
    -------
    DataFrame
        Index: job position; columns ``job_id``, ``tenant``, ``queueing_delay_s``,
        ``anomaly_delay_s``.
    """
    if not all(hasattr(result, a) for a in ("runs", "jobs", "rounds", "gpu_types", "extra")):
        raise ValidationError(f"`result` must be a SimulationResult (from hetsched.simulate); got "
                              f"{type(result).__name__}.")
    if not all(hasattr(setup, a) for a in ("forest", "tenants", "request", "v_level")):
        raise ValidationError(f"`setup` must be a hetsched.hived.Setup (``scheduler.setup(cluster)``); got "
                              f"{type(setup).__name__}.")
    runs = result.runs
    if runs is None:
        raise ValidationError("`result` needs its run log: simulate with record_runs=True.")
    jobs = result.jobs
    n = len(jobs)
    ents = np.asarray(entities, dtype=object).reshape(-1)
    if ents.shape[0] != n:
        raise ValidationError(f"`entities` must have one entry per job ({n}); got {ents.shape[0]}.")
    tenant = np.array([setup.tenants.index(str(e), job=jobs["job_id"].iloc[i]) for i, e in enumerate(ents.tolist())],
                      dtype=np.int64)
    klass = np.zeros(n, dtype=np.int64) if job_class is None else np.asarray(job_class, dtype=np.int64).reshape(-1)
    topo = setup.forest.topology
    cols = [topo.type_index(t, argument="result") for t in result.gpu_types]
    T = np.asarray(result.extra["throughputs"], dtype=float)
    k = jobs["scale_factor"].to_numpy(dtype=np.int64)
    arrival = jobs["arrival_s"].to_numpy(dtype=float)
    finish = jobs["finish_s"].to_numpy(dtype=float)
    finish = np.where(np.isnan(finish), np.inf, finish)
    rq = {}
    for j in range(n):
        for kc in range(len(cols)):
            if T[j, kc] > 0:
                rq[j, kc] = setup.request(int(k[j]), cols[kc])
    vc_levels: dict[tuple[int, int], np.ndarray] = {}
    for v in range(len(setup.tenants)):
        for t in set(cols):
            m = (setup.v_tenant == v) & (setup.v_type == t)
            vc_levels[v, t] = setup.v_level[m]
    delay = np.zeros(n)
    rounds = result.rounds
    run_round = runs["round"].to_numpy(dtype=np.int64)
    run_job = runs["job"].to_numpy(dtype=np.int64)
    run_col = runs["gpu_type"].to_numpy(dtype=np.int64)
    by_round = pd.Series(np.arange(run_round.shape[0])).groupby(run_round).indices if run_round.size else {}
    for rnd, start, secs in zip(rounds["round"].tolist(), rounds["start_s"].tolist(), rounds["seconds"].tolist()):
        idx = by_round.get(rnd, np.zeros(0, dtype=np.int64))
        running = np.zeros(n, dtype=bool)
        running[run_job[idx]] = True
        waiting = np.flatnonzero((arrival <= start) & (finish > start) & ~running & (klass == GUARANTEED))
        if waiting.size == 0:
            continue
        items: dict[tuple[int, int], list[int]] = {}
        for i in idx.tolist():
            j = run_job[i]
            if klass[j] != GUARANTEED:
                continue
            lev, cnt = rq[j, int(run_col[i])]
            items.setdefault((int(tenant[j]), cols[int(run_col[i])]), []).extend([lev] * cnt)
        for j in waiting.tolist():
            v = int(tenant[j])
            for kc in range(len(cols)):
                if (j, kc) not in rq:
                    continue
                lev, cnt = rq[j, kc]
                t = cols[kc]
                cells = vc_levels[v, t]
                if lev < 0 or cells.size == 0:
                    continue
                if chain_fits(setup.forest.sizes[t], cells, items.get((v, t), []) + [lev] * cnt):
                    delay[j] += secs
                    break
    out = pd.DataFrame({"job_id": jobs["job_id"].to_numpy(), "tenant": [setup.tenants.names[v] for v in tenant],
                        "queueing_delay_s": jobs["queueing_delay_s"].to_numpy(dtype=float),
                        "anomaly_delay_s": delay}, index=jobs.index)
    return out


def tenant_metrics(result: Any, setup: Any, workload: Any, *, by_entity: bool,
                   job_priority: Any = None) -> dict[str, Any]:
    """The tenant metrics :func:`hetsched.simulate` adds to ``result.extra`` when it runs
    :class:`~hetsched.hived.HiveD` or :class:`~hetsched.hived.QuotaScheduler`.

    Parameters
    ----------
    result : SimulationResult
    setup : Setup
        The scheduler's setup on the result's cluster.
    workload : Workload
        The simulated workload (its entities name the jobs' tenants).
    by_entity : bool
        Whether jobs belong to tenants by entity (a tenant file was given); else every job
        belongs to the one default tenant.
    job_priority : Mapping, optional
        The scheduler's per-job class overrides.

    Returns
    -------
    dict
        ``"tenant_metrics"``: one row per tenant (``jobs``, ``guaranteed_jobs``,
        ``anomaly_delay_h``, ``jobs_with_anomaly``, ``avg_queueing_delay_h``; the anomaly
        columns are NaN without a run log, ``record_runs=False``); ``"anomaly"``: the per-job
        frame of :func:`anomaly_delay` (None without a run log); ``"fragmentation"``: per
        round, GPU type and level (``HiveDState.fragmentation_frame``), and
        ``"fragmentation_mean"``: its mean per GPU type and level.
    """
    n = len(result.jobs)
    names = list(setup.tenants.names)
    if by_entity:
        ents = np.asarray(workload.jobs.entities, dtype=object).reshape(-1)
    else:
        ents = np.array([names[0]] * n, dtype=object)
    ids = result.jobs["job_id"].to_numpy()
    tenant = np.array([setup.tenants.index(str(e), job=ids[i]) for i, e in enumerate(ents.tolist())], dtype=np.int64)
    default = np.array([PRIORITIES.index(t.priority) for t in setup.tenants.tenants], dtype=np.int64)
    klass = with_job_priority(default[tenant] if n else np.zeros(0, np.int64), ids, job_priority)
    anomaly = anomaly_delay(result, setup, ents, job_class=klass) if result.runs is not None else None
    rows = []
    for v, name in enumerate(names):
        mine = tenant == v
        row = {"tenant": name, "jobs": int(mine.sum()), "guaranteed_jobs": int((mine & (klass == GUARANTEED)).sum()),
               "anomaly_delay_h": np.nan, "jobs_with_anomaly": np.nan, "avg_queueing_delay_h": np.nan}
        if anomaly is not None and mine.any():
            a = anomaly["anomaly_delay_s"].to_numpy()[mine]
            row.update(anomaly_delay_h=float(a.sum()) / 3600.0, jobs_with_anomaly=int((a > 0).sum()),
                       avg_queueing_delay_h=float(anomaly["queueing_delay_s"].to_numpy()[mine].mean()) / 3600.0)
        rows.append(row)
    state = result.extra.get("scheduler_state")
    frag = state.fragmentation_frame(setup.forest.topology) if isinstance(state, HiveDState) else None
    mean = None if frag is None else frag.groupby(["gpu_type", "level"], sort=False)["fragmentation"].mean()
    return {"tenant_metrics": pd.DataFrame(rows), "anomaly": anomaly, "fragmentation": frag,
            "fragmentation_mean": None if mean is None else mean.reset_index()}
