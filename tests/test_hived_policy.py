"""Tenant guarantees with throughput awareness (issue 26 item 3), fragmentation by hand, and
HiveD from the command line and the demo (item 7)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import hetsched as hs
from hetsched.cli import main
from hetsched.hived import CellForest, TenantPolicy, fragmentation
from hetsched.inputs.topology import Level, Topology

TEN = {"tenants": [{"name": "e0", "cells": {"v100": {"server": 1}, "k80": {"server": 1}}},
                   {"name": "e1", "cells": {"p100": {"server": 1}}}]}


def test_fragmentation_by_hand():
    f = CellForest.build(Topology.from_counts({"v100": 8}, gpus_per_server=8,
                                              levels=[Level("pair", size=2), Level("switch", size=2), Level("server")]))
    # GPUs 0, 2, 4, 6 busy: the 4 free GPUs are single; no pair, switch or server is free
    assert fragmentation(f, [0, 2, 4, 6]).tolist() == [[0.0, 1.0, 1.0, 1.0]]
    # GPUs 0, 1 busy: 6 free GPUs, 3 free pairs (6 GPUs: 0), 1 free switch (4 of 6: 1/3), no server
    assert np.allclose(fragmentation(f, [0, 1]), [[0.0, 0.0, 1 / 3, 1.0]])
    assert np.isnan(fragmentation(f, np.arange(8))).all()        # nothing free


def test_one_tenant_without_the_pool_is_the_unconstrained_policy():
    """Two formulations that must agree: the policy on one tenant that owns every cell is
    the plain policy, job for job."""
    w = hs.generate_workload(15, rate_per_hour=6.0, seed=4, n_entities=2, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    a = hs.simulate("max_min_fairness", w, cl)
    b = hs.simulate(TenantPolicy(share_idle=False), w, cl)
    assert np.array_equal(a.jobs["jct_s"].to_numpy(), b.jobs["jct_s"].to_numpy())


@pytest.mark.parametrize("share_idle", [False, True])
def test_tenant_guarantees_hold(share_idle):
    """Every round, each tenant's own (non-pool) rows hold at most its quota per type; without
    the pool nothing else runs; with it, jobs of any tenant fill what is idle."""
    w = hs.generate_workload(20, rate_per_hour=12.0, seed=5, n_entities=2, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    seen = []

    class Spy(TenantPolicy):
        def plan_round(self, view, state):
            rows = super().plan_round(view, state)
            seen.append((view, rows))
            return rows

    res = hs.simulate(Spy(tenants=TEN, share_idle=share_idle), w, cl)
    assert res.summary["n_completed"] == 20
    quota = {"e0": {"v100": 8, "k80": 8, "p100": 0}, "e1": {"v100": 0, "k80": 0, "p100": 8}}
    pooled = 0
    for view, rows in seen:
        ent = dict(zip(view.jobs.tolist(), view.entities.tolist()))
        n_own = rows.payload["n_tenant_rows"]
        for e in ("e0", "e1"):
            for k, t in enumerate(view.gpu_types):
                own = sum(int(g) for i, (j, kk, g) in enumerate(zip(rows.job, rows.gpu_type, rows.gpus))
                          if i < n_own and ent[int(j)] == e and kk == k)
                assert own <= quota[e][t]
        pooled += rows.n_rows - n_own
    assert (pooled > 0) == share_idle


def test_policy_inside_cells_keeps_jct_close_to_the_unconstrained_policy():
    """The measured comparison of docs/hived.md (item 3), at test size: with the idle pool,
    tenants' guarantees cost little average JCT; without it, idle quota is lost."""
    w = hs.generate_workload(20, rate_per_hour=8.0, seed=6, n_entities=2, long_job_prob=0.0)
    cl = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    free = hs.simulate("max_min_fairness", w, cl).summary["avg_jct_hours"]
    pool = hs.simulate(TenantPolicy(tenants=TEN), w, cl).summary["avg_jct_hours"]
    strict = hs.simulate(TenantPolicy(tenants=TEN, share_idle=False), w, cl).summary["avg_jct_hours"]
    assert strict >= pool                       # the pool only adds running jobs
    assert pool <= 1.5 * free                   # measured 1.04x here, 1.11-1.12x on the trace of docs/hived.md


def test_online_tenant_policy_reopens(tmp_path):
    cl = hs.Cluster({"v100": 8, "p100": 8, "k80": 8})
    path = tmp_path / "tp.db"
    s = hs.OnlineScheduler(TenantPolicy(tenants=TEN), cl, store=path, round_seconds=360.0)
    s.submit("a", scale_factor=2, throughputs={"v100": 3.0, "p100": 2.0, "k80": 1.0}, total_steps=1e6, entity="e0")
    s.submit("b", scale_factor=4, throughputs={"v100": 3.0, "p100": 2.0, "k80": 1.0}, total_steps=1e6, entity="e1")
    first = s.next_round(0.0).assignments.set_index("job_id")
    assert first.loc["b", "gpu_type"] == "p100"           # e1 owns only P100s
    s.close()
    s = hs.OnlineScheduler(TenantPolicy(tenants=TEN), cl, store=path, round_seconds=360.0)
    again = s.next_round(360.0).assignments.set_index("job_id")
    assert again.loc["b", "gpu_type"] == "p100"
    s.close()


def _run(argv, capsys):
    rc = main(argv)
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_cli_topology_and_tenants(tmp_path, capsys):
    topo = tmp_path / "topo.json"
    topo.write_text(json.dumps({"levels": [{"name": "pair", "size": 2, "bandwidth": 300}, {"name": "server"},
                                           {"name": "rack"}], "counts": {"v100": 16}, "gpus_per_server": 8}))
    ten = tmp_path / "tenants.json"
    ten.write_text(json.dumps({"tenants": [{"name": "e0", "cells": {"v100": {"server": 1}}},
                                           {"name": "e1", "cells": {"v100": {"server": 1}}}]}))
    for policy in ("hived", "hived_quota"):
        rc, out, _ = _run(["simulate", "--policy", policy, "--topology", str(topo), "--tenants", str(ten), "--jobs",
                           "12", "--rate", "6", "--no-progress"], capsys)
        assert rc == 0 and "12 / 12" in out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tenants": [{"name": "e0", "cells": {"v100": {"server": 3}}}]}))
    rc, _, err = _run(["simulate", "--policy", "hived", "--topology", str(topo), "--tenants", str(bad), "--jobs", "2"],
                      capsys)
    assert rc == 2 and "tenant 'e0' needs a cell at level 'server'" in err
    rc, _, err = _run(["simulate", "--policy", "fifo", "--tenants", str(ten), "--jobs", "2"], capsys)
    assert rc == 2 and "`--tenants` applies to --policy hived" in err
    rc, out, _ = _run(["simulate", "--policy", "hived_policy", "--param", "policy=max_min_fairness", "--topology",
                       str(topo), "--tenants", str(ten), "--jobs", "8", "--rate", "6", "--no-progress"], capsys)
    assert rc == 0 and "8 / 8" in out
    rc, _, err = _run(["simulate", "--policy", "hived", "--topology", str(topo), "--gpus-per-server", "4"], capsys)
    assert rc == 2 and "--gpus-per-server" in err


def test_demo_runs_hived(capsys):
    rc, out, _ = _run(["demo", "--jobs", "6", "--policies", "hived,hived_quota,hived_policy"], capsys)
    assert rc == 0 and "hived_quota" in out and "hived_policy" in out
