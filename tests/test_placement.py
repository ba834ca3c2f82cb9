"""Placement by min-cost flow: an independent checker, solver parity, ILP oracle, stability."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched import Cluster, ValidationError
from hetsched.placement import (
    FlowNetwork,
    Placement,
    PlacementCosts,
    build_network,
    make_request,
    oracle_placement,
    place,
    solve_flow,
)
from hetsched.placement.readback import read_back
from hetsched.placement.solvers import FlowSolution
from hetsched.inputs.topology import Server, Topology

REASONS = {"too_large", "no_rack", "no_capacity", "rolled_back"}


# ---------------------------------------------------------------------------- checker
def check_placement(servers, job_ids, gpu_types, num_gpus, p, *, blocked=(), split_large_jobs=False):
    """Every rule a placement must keep, derived from the server list alone.

    ``servers``: list of (name, gpu_type, num_gpus, rack). GPU ``g`` is GPU ``g - first``
    of the server whose id range ``[first, first + num_gpus)`` holds it (servers in order).
    Returns a list of violations (empty when the placement is valid).
    """
    label, gtype, grack, gserver = {}, {}, {}, {}
    g = 0
    for name, t, n, rack in servers:
        for i in range(n):
            label[g], gtype[g], grack[g], gserver[g] = (name, i), t, rack, name
            g += 1
    blocked_ids = {gid for gid, lab in label.items() if lab in set(blocked)}
    largest = {}
    for _, t, n, _ in servers:
        largest[t] = max(largest.get(t, 0), n)
    bad = []
    owner = {}
    multi = consolidated = placed = 0
    for j, (jid, t, size) in enumerate(zip(job_ids, gpu_types, num_gpus)):
        ids = [int(x) for x in p.gpus[p.gpu_offset[j] : p.gpu_offset[j + 1]]]
        if p.job_ids[j] != jid:
            bad.append(f"job {j}: id {p.job_ids[j]!r} != {jid!r}")
        if not ids:
            if p.reason[j] not in REASONS:
                bad.append(f"job {jid}: unscheduled without a valid reason ({p.reason[j]!r})")
            continue
        placed += 1
        if p.reason[j] != "":
            bad.append(f"job {jid}: placed but reason {p.reason[j]!r}")
        if len(ids) != size or len(set(ids)) != size:
            bad.append(f"job {jid}: holds {len(ids)} GPUs ({len(set(ids))} distinct), needs {size}")
        for x in ids:
            if x not in label:
                bad.append(f"job {jid}: GPU id {x} does not exist")
                continue
            if gtype[x] != t:
                bad.append(f"job {jid}: GPU {label[x]} is {gtype[x]}, job needs {t}")
            if x in blocked_ids:
                bad.append(f"job {jid}: GPU {label[x]} is blocked")
            if x in owner:
                bad.append(f"GPU {label[x]} double-booked by {owner[x]!r} and {jid!r}")
            owner[x] = jid
        srv = {gserver[x] for x in ids if x in label}
        if size > largest.get(t, 0):
            if not split_large_jobs:
                bad.append(f"job {jid}: larger than any server but placed without split_large_jobs")
            if len({grack[x] for x in ids if x in label}) != 1:
                bad.append(f"job {jid}: split over several racks")
        if size > 1:
            multi += 1
            consolidated += len(srv) == 1
    if p.n_placed != placed:
        bad.append(f"n_placed {p.n_placed} != {placed}")
    if p.multi_gpu_placed != multi or p.consolidated != consolidated:
        bad.append(f"consolidated {p.consolidated}/{p.multi_gpu_placed} != {consolidated}/{multi}")
    if p.idle_gpus != len(label) - len(blocked_ids) - len(owner):
        bad.append(f"idle_gpus {p.idle_gpus} != {len(label) - len(blocked_ids) - len(owner)}")
    return bad


def topo_of(servers):
    return Topology([Server(*s) for s in servers])


def test_checker_catches_violations():
    servers = [("s0", "a", 2, "r0"), ("s1", "b", 2, "r0")]
    topo = topo_of(servers)

    def fake(gpus, offsets, reason):
        return Placement(
            topology=topo,
            job_ids=np.array(["x", "y"]),
            gpu_type=np.array([0, 0]),
            num_gpus=np.array([2, 1]),
            gpu_offset=np.array(offsets),
            gpus=np.array(gpus),
            reason=np.array(reason, dtype=object),
            migrated=np.zeros(2, bool),
            flow_cost=0,
            solver="fake",
        )

    ok = fake([0, 1], [0, 2, 2], ["", "no_capacity"])
    assert check_placement(servers, ["x", "y"], ["a", "a"], [2, 1], ok) == []
    double = fake([0, 1, 1], [0, 2, 3], ["", ""])
    assert any("double-booked" in v for v in check_placement(servers, ["x", "y"], ["a", "a"], [2, 1], double))
    wrong_type = fake([0, 1, 2], [0, 2, 3], ["", ""])
    assert any("is b" in v for v in check_placement(servers, ["x", "y"], ["a", "a"], [2, 1], wrong_type))
    half = fake([0, 2], [0, 1, 2], ["", ""])
    assert any("holds 1 GPUs" in v for v in check_placement(servers, ["x", "y"], ["a", "a"], [2, 1], half))
    assert any("blocked" in v for v in check_placement(servers, ["x", "y"], ["a", "a"], [2, 1], ok, blocked=[("s0", 1)]))


# ---------------------------------------------------------------------------- random instances
def random_instance(rng, *, max_servers=6, fit=True, blocked_share=0.3):
    """Servers of 1-2 types (2/4/8 GPUs) in 1-2 racks, some GPUs blocked, Philly-mix jobs."""
    types = ["a", "b"][: int(rng.integers(1, 3))]
    servers = [
        (f"s{i}", str(rng.choice(types)), int(rng.choice([2, 4, 8])), f"r{int(rng.integers(0, 2))}")
        for i in range(int(rng.integers(2, max_servers + 1)))
    ]
    n_gpus = sum(s[2] for s in servers)
    labels = [(s[0], i) for s in servers for i in range(s[2])]
    blocked = [labels[g] for g in np.flatnonzero(rng.random(n_gpus) < rng.uniform(0, blocked_share))]
    bset = set(blocked)
    ids, jt, js = [], [], []
    load = rng.uniform(0.3, 1.0 if fit else 1.5)
    for t in sorted({s[1] for s in servers}):
        cap = sum(1 for s in servers if s[1] == t for i in range(s[2]) if (s[0], i) not in bset)
        big = max(s[2] for s in servers if s[1] == t)
        total = 0
        for _ in range(40):
            size = min(int(rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05])), big)
            if fit and total + size > load * cap:
                continue
            if not fit and total + size > load * max(cap, 1):
                break
            ids.append(f"j{len(ids)}")
            jt.append(t)
            js.append(size)
            total += size
    return servers, ids, jt, js, blocked


# ---------------------------------------------------------------------------- hand-derived cases
def test_whole_gangs_on_empty_cluster():
    servers = [("s0", "v100", 8, "r0"), ("s1", "v100", 8, "r0")]
    p = place(topo_of(servers), ["a", "b", "c"], ["v100"] * 3, [8, 4, 4])
    assert check_placement(servers, ["a", "b", "c"], ["v100"] * 3, [8, 4, 4], p) == []
    assert (p.n_placed, p.consolidated, p.idle_gpus, p.migrations) == (3, 3, 0, 0)
    assert {s for s, _ in p.gpus_of("b")} == {s for s, _ in p.gpus_of("c")}  # 4 + 4 share a server


def test_best_fit_uses_the_tightest_server():
    # s0 has 4 usable GPUs, s1 has 8: the 8-gang needs s1, the 4-gang must take s0.
    servers = [("s0", "a", 8, "r0"), ("s1", "a", 8, "r0")]
    blocked = [("s0", i) for i in range(4)]
    p = place(topo_of(servers), ["small", "big"], ["a", "a"], [4, 8], blocked=blocked)
    assert check_placement(servers, ["small", "big"], ["a", "a"], [4, 8], p, blocked=blocked) == []
    assert {s for s, _ in p.gpus_of("small")} == {"s0"}
    assert {s for s, _ in p.gpus_of("big")} == {"s1"}
    # one-GPU jobs fill the holes of the tightest server first
    p2 = place(topo_of(servers), ["x", "y"], ["a", "a"], [1, 1], blocked=blocked + [("s1", 0)])
    assert {s for j in ("x", "y") for s, _ in p2.gpus_of(j)} == {"s0"}


def test_gang_split_only_when_no_server_holds_it():
    servers = [("s0", "a", 4, "r0"), ("s1", "a", 4, "r0"), ("s2", "a", 4, "r1")]
    blocked = [("s0", 0), ("s0", 1), ("s1", 0), ("s2", 0), ("s2", 1)]  # free: 2, 3, 2
    p = place(topo_of(servers), ["g"], ["a"], [4], blocked=blocked)
    assert check_placement(servers, ["g"], ["a"], [4], p, blocked=blocked) == []
    assert p.n_placed == 1 and p.consolidated == 0
    assert {s for s, _ in p.gpus_of("g")} == {"s0", "s1"}  # the rack r0 holds it (2 + 3 >= 4)
    assert p.rack_local == 1


def test_waiting_job_wins_under_overload():
    servers = [("s0", "a", 4, "r0")]
    p = place(topo_of(servers), ["new", "old"], ["a", "a"], [4, 4], waiting=[0, 3], allow_overcommit=True)
    assert p.gpus_of("new") == [] and len(p.gpus_of("old")) == 4
    assert p.reason.tolist() == ["no_capacity", ""]


def test_too_large_jobs_flag_and_reasons():
    servers = [("s0", "a", 4, "r0"), ("s1", "a", 4, "r0"), ("s2", "a", 4, "r1"), ("s3", "b", 4, "r1")]
    topo = topo_of(servers)
    ids, jt, js = ["big", "small"], ["a", "a"], [8, 2]
    p = place(topo, ids, jt, js)
    assert p.reason.tolist() == ["too_large", ""]
    assert check_placement(servers, ids, jt, js, p) == []
    q = place(topo, ids, jt, js, split_large_jobs=True)
    assert q.reason.tolist() == ["", ""]
    assert check_placement(servers, ids, jt, js, q, split_large_jobs=True) == []
    assert {s for s, _ in q.gpus_of("big")} == {"s0", "s1"}  # the only rack with 8 GPUs of type a
    # a rack too small for it -> unscheduled with the reason
    r = place(topo, ["big"], ["a"], [8], split_large_jobs=True, blocked=[("s0", 0)])
    assert r.reason.tolist() == ["no_rack"]


def test_repair_completes_or_rolls_back_partial_flow():
    """Poseidon's rule on a hand-made partial flow: whole or nothing, never half-placed."""
    servers = [("s0", "a", 4, "r0"), ("s1", "a", 2, "r0")]
    topo = topo_of(servers)
    req = make_request(topo, ["p", "q"], ["a", "a"], [4, 2], allow_overcommit=True, blocked=[("s1", 0), ("s1", 1)])
    net = build_network(req, PlacementCosts())
    flow = np.zeros(net.n_arcs, np.int64)
    a = net.arcs
    # p: 3 GPUs through the spread path to s0, 1 unscheduled; q: 1 through spread to s0, 1 unscheduled
    flow[a["unscheduled"]] = [1, 1]
    flow[a["spread"]] = [3, 1]
    flow[a["type_rack"]] = [4]
    flow[a["rack_server"]] = [4, 0]
    flow[a["server_sink"]] = [4, 0]
    assert_conservation(net, flow)
    rb = read_back(req, net, FlowSolution(flow=flow, cost=net.cost_of(flow), solver="hand", solve_s=0.0))
    held = np.diff(rb.gpu_offset).tolist()
    assert held == [4, 0]  # p (more served) completes on the 4 free GPUs; q is rolled back
    assert rb.reason.tolist() == ["", "rolled_back"]
    assert (rb.repaired, rb.rolled_back) == (1, 1)


def assert_conservation(net: FlowNetwork, flow):
    bal = np.zeros(net.n_nodes, np.int64)
    np.add.at(bal, net.tails, flow)
    np.subtract.at(bal, net.heads, flow)
    assert np.array_equal(bal, net.supply)
    assert np.all((flow >= 0) & (flow <= net.capacity))


# ---------------------------------------------------------------------------- stability
def test_zero_migrations_when_nothing_changes():
    rng = np.random.default_rng(7)
    cluster = Cluster.from_servers({"a": 64, "b": 32}, gpus_per_server=8, servers_per_rack=2)
    sizes = rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05], size=40)
    types = np.where(np.arange(40) % 3 == 0, "b", "a")
    keep = np.cumsum(np.where(types == "a", sizes, 0)) <= 60
    keep &= np.cumsum(np.where(types == "b", sizes, 0)) <= 30
    ids = np.arange(40)[keep]
    first = place(cluster, ids, types[keep], sizes[keep])
    second = place(cluster, ids, types[keep], sizes[keep], previous=first)
    assert second.migrations == 0
    assert np.array_equal(first.gpus, second.gpus) and np.array_equal(first.gpu_offset, second.gpu_offset)
    # jobs leaving does not move the others
    stay = ids[::2]
    third = place(cluster, stay, types[keep][::2], sizes[keep][::2], previous=second)
    assert third.migrations == 0
    for j in stay[:10]:
        assert third.gpus_of(j) == second.gpus_of(j)


def test_grown_job_keeps_its_gpus_and_type_change_is_not_a_migration():
    servers = [("s0", "a", 8, "r0"), ("s1", "b", 8, "r0")]
    topo = topo_of(servers)
    first = place(topo, ["g", "t"], ["a", "a"], [2, 1])
    second = place(topo, ["g", "t"], ["a", "b"], [4, 1], previous=first)
    assert set(first.gpus_of("g")) <= set(second.gpus_of("g"))
    assert {s for s, _ in second.gpus_of("t")} == {"s1"}
    assert second.migrations == 0 and second.consolidated == 1


def test_previous_as_mapping_of_labels():
    servers = [("s0", "a", 4, "r0"), ("s1", "a", 4, "r0")]
    topo = topo_of(servers)
    p = place(topo, ["x"], ["a"], [2], previous={"x": [("s1", 2), ("s1", 3)], "gone": [("s0", 0)]})
    assert p.gpus_of("x") == [("s1", 2), ("s1", 3)] and p.migrations == 0
    # the previous server is now blocked: the job must move, which counts as a migration
    q = place(topo, ["x"], ["a"], [2], previous=p, blocked=["s1"])
    assert {s for s, _ in q.gpus_of("x")} == {"s0"} and q.migrations == 1


# ---------------------------------------------------------------------------- solvers
def random_network(rng):
    servers, ids, jt, js, blocked = random_instance(rng, fit=False)
    topo = topo_of(servers)
    prev = None
    if rng.random() < 0.5 and ids:
        prev = place(topo, ids, jt, js, blocked=blocked, allow_overcommit=True)
    req = make_request(
        topo, ids, jt, js, previous=prev, waiting=rng.integers(0, 3, len(ids)), blocked=blocked,
        split_large_jobs=bool(rng.random() < 0.5), allow_overcommit=True,
    )
    return build_network(req, PlacementCosts(fragmentation=float(rng.uniform(0, 5))))


def test_ortools_and_networkx_same_optimal_cost():
    rng = np.random.default_rng(11)
    for _ in range(25):
        net = random_network(rng)
        a, b = solve_flow(net, "ortools"), solve_flow(net, "networkx")
        assert a.cost == b.cost
        assert a.cost == net.cost_of(a.flow) and b.cost == net.cost_of(b.flow)
        assert_conservation(net, a.flow)
        assert_conservation(net, b.flow)


def test_ortools_and_networkx_on_generic_random_graphs():
    """Same optimum on random graphs that are not placement networks."""
    rng = np.random.default_rng(5)
    for _ in range(25):
        n = int(rng.integers(3, 25))
        m = int(rng.integers(n, 5 * n))
        tails = rng.integers(0, n, m)
        heads = rng.integers(0, n, m)
        keep = tails != heads
        tails, heads = tails[keep], heads[keep]
        cap = rng.integers(0, 10, tails.size)
        cost = rng.integers(0, 50, tails.size)
        supply = np.zeros(n, np.int64)
        src, dst = rng.choice(n, 2, replace=False)
        supply[src], supply[dst] = 5, -5
        # a direct expensive arc keeps every instance feasible
        tails = np.append(tails, src)
        heads = np.append(heads, dst)
        cap = np.append(cap, 5)
        cost = np.append(cost, 1000)
        e = np.zeros(0, np.int64)
        net = FlowNetwork(
            n_nodes=n, tails=tails.astype(np.int32), heads=heads.astype(np.int32),
            capacity=cap.astype(np.int64), cost=cost.astype(np.int64), supply=supply, arcs={},
            cont_job=e, cont_server=e, rack_job=e, rack_pair=e, fit_job=e, spread_job=e,
            pair_type=e, pair_rack=e, server_pair=e, class_cap=e, too_large=np.zeros(0, bool),
        )
        assert solve_flow(net, "ortools").cost == solve_flow(net, "networkx").cost


# ---------------------------------------------------------------------------- ILP oracle
def test_flow_and_readback_within_margin_of_ilp_oracle():
    """Stated margin: on tiny clusters where the plan fits the usable GPUs, every job is
    placed (as by the oracle), each instance consolidates at most 1 gang fewer than the ILP
    optimum, and over all instances at least 95 % of the oracle's consolidated gangs.
    (Measured over 1,000 such instances: equal on every one; see docs/placement.md.)"""
    rng = np.random.default_rng(2024)
    ours_total = oracle_total = 0
    for _ in range(120):
        servers, ids, jt, js, blocked = random_instance(rng)
        if not ids:
            continue
        topo = topo_of(servers)
        p = place(topo, ids, jt, js, blocked=blocked)
        assert check_placement(servers, ids, jt, js, p, blocked=blocked) == []
        o = oracle_placement(make_request(topo, ids, jt, js, blocked=blocked))
        assert o.status == "optimal"
        assert o.placed.all() and p.n_placed == len(ids)
        assert p.consolidated >= o.consolidated - 1
        ours_total += p.consolidated
        oracle_total += o.consolidated
    assert oracle_total > 50
    assert ours_total >= 0.95 * oracle_total


def test_oracle_on_a_hand_case():
    # free GPUs: s0 has 2, s1 has 4; gangs 2 and 4 fit whole only as (2 -> s0, 4 -> s1)
    servers = [("s0", "a", 4, "r0"), ("s1", "a", 4, "r0")]
    topo = topo_of(servers)
    req = make_request(topo, ["x", "y"], ["a", "a"], [2, 4], blocked=[("s0", 0), ("s0", 1)])
    o = oracle_placement(req)
    assert o.consolidated == 2 and o.placed_gpus == 6
    assert o.x.tolist() == [[2, 0], [0, 4]]


# ---------------------------------------------------------------------------- order matters
def test_best_fit_decreasing_beats_arbitrary_decomposition():
    cluster = Cluster.from_servers({"a": 800}, gpus_per_server=8, servers_per_rack=10)
    rng = np.random.default_rng(3)
    sizes = rng.choice([1, 2, 4, 8], p=[0.7, 0.1, 0.15, 0.05], size=400)
    sizes = sizes[np.cumsum(sizes) <= 720]
    ids = np.arange(sizes.size)
    bfd = place(cluster, ids, ["a"] * ids.size, sizes)
    arb = place(cluster, ids, ["a"] * ids.size, sizes, order="arbitrary")
    assert bfd.n_placed == arb.n_placed == ids.size
    assert bfd.flow_cost == arb.flow_cost  # same flow, different decomposition
    assert bfd.consolidated_share >= 0.99
    assert arb.consolidated_share < bfd.consolidated_share


# ---------------------------------------------------------------------------- bad input
def test_bad_input_messages():
    cluster = Cluster.from_servers({"a": 8, "b": 4}, gpus_per_server=4)
    with pytest.raises(ValidationError, match=r"12 of type 'a' \(cluster has 8\)"):
        place(cluster, [1, 2], ["a", "a"], [8, 4])
    with pytest.raises(ValidationError, match=r"job 1 asks for 16 GPUs of type 'a' but the cluster has 8"):
        place(cluster, [1], ["a"], [16], allow_overcommit=True)
    with pytest.raises(ValidationError, match=r"unknown GPU types \['h100'\]"):
        place(cluster, [1], ["h100"], [1])
    with pytest.raises(ValidationError, match="unknown server 'nope'"):
        place(cluster, [1], ["a"], [1], blocked=["nope"])
    with pytest.raises(ValidationError, match="unknown server 'nope'"):
        place(cluster, [1], ["a"], [1], previous={1: [("nope", 0)]})
    with pytest.raises(ValidationError, match="more than one job"):
        place(cluster, [1, 2], ["a", "a"], [1, 1], previous={1: [0], 2: [0]})
    with pytest.raises(ValidationError, match="costs.migration"):
        place(cluster, [1], ["a"], [1], costs=PlacementCosts(migration=-1.0))
    with pytest.raises(ValidationError, match="costs.spread"):
        PlacementCosts(spread=float("nan"))
    with pytest.raises(ValidationError, match=r"`waiting` must be finite and non-negative; job 1 is -1\.0"):
        place(cluster, [1], ["a"], [1], waiting=[-1])
    with pytest.raises(ValidationError, match=r"`num_gpus` must be positive integers; job 1 has 0"):
        place(cluster, [1], ["a"], [0])
    with pytest.raises(ValidationError, match="unique"):
        place(cluster, [1, 1], ["a", "a"], [1, 1])
    with pytest.raises(ValidationError, match="no server topology"):
        place(Cluster({"a": 8}), [1], ["a"], [1])
    with pytest.raises(ValidationError, match="`solver`"):
        place(cluster, [1], ["a"], [1], solver="glpk")
    with pytest.raises(ValidationError, match="`gpu_types` must have shape"):
        place(cluster, [1, 2], ["a"], [1, 1])


def test_overcommit_leaves_the_excess_unscheduled():
    servers = [("s0", "a", 8, "r0")]
    ids, jt, js = ["x", "y", "z"], ["a"] * 3, [4, 4, 2]
    p = place(topo_of(servers), ids, jt, js, allow_overcommit=True)
    assert check_placement(servers, ids, jt, js, p) == []
    assert p.n_placed == 2 and p.idle_gpus == 0


def test_empty_plan_and_frame():
    cluster = Cluster.from_servers({"a": 8})
    p = place(cluster, [], [], [])
    assert p.n_placed == 0 and p.idle_gpus == 8
    q = place(cluster, ["x"], ["a"], [2])
    df = q.to_frame()
    assert df.loc[0, "placed"] and df.loc[0, "gpus"] == [("a-s0", 0), ("a-s0", 1)]
    assert q.as_mapping() == {"x": [("a-s0", 0), ("a-s0", 1)]}
    assert q.summary()["placed_jobs"] == 1


# ---------------------------------------------------------------------------- hypothesis
def _gang_instance(seed: int, fit: bool):
    """A random instance (``random_instance``) for ``seed``, sometimes with a job larger than
    any server, and waiting times: (servers, ids, types, sizes, blocked, waiting)."""
    rng = np.random.default_rng(seed)
    servers, ids, jt, js, blocked = random_instance(rng, max_servers=8, fit=fit)
    if rng.random() < 0.3 and ids:
        js[0] = 2 * max(s[2] for s in servers if s[1] == jt[0])
        if sum(s[2] for s in servers if s[1] == jt[0]) < js[0]:
            js[0] = 1
    return servers, ids, jt, js, blocked, rng.integers(0, 4, len(ids))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), fit=st.booleans(), split=st.booleans())
def test_random_topologies_keep_every_rule(seed, fit, split):
    servers, ids, jt, js, blocked, waiting = _gang_instance(seed, fit)
    topo = topo_of(servers)
    kw = dict(blocked=blocked, split_large_jobs=split, allow_overcommit=True)
    p = place(topo, ids, jt, js, waiting=waiting, **kw)
    assert check_placement(servers, ids, jt, js, p, blocked=blocked, split_large_jobs=split) == []
    if fit and not any(s > max(x[2] for x in servers if x[1] == t) for t, s in zip(jt, js)):
        assert p.n_placed == len(ids)
    # stability: the same plan again (same waiting times: nothing changes) keeps every GPU.
    # Not asserted when a gang is split over servers: see the seed sweep and the strict xfail below.
    again = place(topo, ids, jt, js, previous=p, waiting=waiting, **kw)
    split_gang = split and any(s > max(x[2] for x in servers if x[1] == t) for t, s in zip(jt, js))
    if not split_gang:
        assert again.migrations == 0
        assert np.array_equal(again.gpus, p.gpus) or again.n_placed > p.n_placed
    # the pure-Python solver reaches the same optimal cost and a valid placement
    nx = place(topo, ids, jt, js, solver="networkx", **kw)
    assert nx.flow_cost == place(topo, ids, jt, js, **kw).flow_cost
    assert check_placement(servers, ids, jt, js, nx, blocked=blocked, split_large_jobs=split) == []


def test_place_plan_takes_the_running_jobs_of_a_round_plan():
    from types import SimpleNamespace

    cluster = Cluster.from_servers({"a": 8, "b": 8}, gpus_per_server=4)
    plan = SimpleNamespace(
        mode="rounds",
        job_ids=np.array(["x", "y", "z"]),
        gpu_types=("b", "a"),  # the plan's own column order
        assignment=np.array([1, -1, 0]),
        scale_factors=np.array([4, 2, 2]),
    )
    from hetsched.placement import place_plan

    p = place_plan(cluster, plan, waiting=[0, 5, 1])
    assert p.job_ids.tolist() == ["x", "z"]
    assert {s for s, _ in p.gpus_of("x")} <= {"a-s0", "a-s1"} and len(p.gpus_of("x")) == 4
    assert {s for s, _ in p.gpus_of("z")} <= {"b-s0", "b-s1"}
    with pytest.raises(ValidationError, match="'rounds'-mode"):
        place_plan(cluster, SimpleNamespace(mode="ideal"))


def _split_gang_rounds(seed: int, fit: bool | None = None):
    """The Hypothesis test's instance for ``seed`` (``fit`` default: odd seeds) placed with
    split_large_jobs; returns (placement, the same round placed again, split gang?)."""
    servers, ids, jt, js, blocked, waiting = _gang_instance(seed, bool(seed % 2) if fit is None else fit)
    split_gang = any(s > max(x[2] for x in servers if x[1] == t) for t, s in zip(jt, js))
    kw = dict(blocked=blocked, split_large_jobs=True, allow_overcommit=True)
    p = place(topo_of(servers), ids, jt, js, waiting=waiting, **kw)
    again = place(topo_of(servers), ids, jt, js, previous=p, waiting=waiting, **kw)
    return p, again, split_gang


def test_split_gang_stability_regression():
    """Found by Hypothesis (seed 14220887): a 16-GPU gang that only partly fits takes flow
    from the continuing jobs, is rolled back, and the pooled flow of the jobs it displaced
    used to be packed into the tightest server instead of where they ran: 2 migrations in an
    unchanged round. Pooled flow now goes to a job's previous servers first."""
    _, again, _ = _split_gang_rounds(14220887, fit=False)
    assert again.migrations == 0


def test_split_gang_rounds_are_stable_on_a_seed_sweep():
    """An unchanged round with split gangs keeps every GPU on the first 1,200 seeds of the
    generator (239 instances with a split gang; 2 of them, seeds 189 and 515, migrated before
    a job's previous servers were preferred)."""
    n_split = 0
    for seed in range(1200):
        p, again, split_gang = _split_gang_rounds(seed)
        n_split += split_gang
        assert again.migrations == 0, f"seed {seed}"
        assert np.array_equal(again.gpus, p.gpus) or again.n_placed > p.n_placed, f"seed {seed}"
    assert n_split > 150


def test_split_gang_spread_again_over_its_own_servers():
    """Seed 2580: an 8-GPU gang spread over two servers keeps 6 GPUs by continuation and needs
    2 more; no single server of its own has 2 free, but its two servers together do. It used
    to take the tightest other server, pushing a running 2-GPU job off it."""
    p, again, split_gang = _split_gang_rounds(2580)
    assert split_gang and again.migrations == 0 and np.array_equal(again.gpus, p.gpus)


@pytest.mark.xfail(strict=True, reason="open: a 16-GPU gang that takes partial flow and is rolled back still "
                   "moves 2 jobs here (2 of 1,656 split-gang instances on seeds 4000-11999, 36 before this "
                   "session); fix = solve the flow again without rolled-back jobs (measured too slow at 80k GPUs)")
def test_split_gang_stability_known_residual():
    _, again, split_gang = _split_gang_rounds(6922)
    assert split_gang and again.migrations == 0
