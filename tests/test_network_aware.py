"""Network-aware placement (issue 26, item 6): max-min link shares, the rate factors the
simulator applies, the placement cost that keeps communication-heavy gangs whole, and the
simulator / CLI faces.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.cli import main
from hetsched.errors import ValidationError
from hetsched.placement import (
    Interconnect,
    NetworkAware,
    PlacementCosts,
    max_min_shares,
    place,
    preset_graph,
)
from hetsched.placement.contention import spread_links
from hetsched.placement.network_aware import rate_factors


# ---------------------------------------------------------------- max-min shares
def test_one_link_three_jobs_by_hand():
    # capacity 10, loads 8, 4, 2: equal shares 10/3 = 3.33 exceed 2, so the third gets 2; the
    # remaining 8 split 4 / 4, which is the second's load: x = (4, 4, 2).
    x = max_min_shares(np.ones((3, 1)), np.array([8.0, 4.0, 2.0]), np.array([10.0]))
    assert x.tolist() == [4.0, 4.0, 2.0]


def test_two_links_by_hand():
    # link 0 (cap 10): jobs A, B; link 1 (cap 4): jobs B, C; all loads 10. Link 1 is the
    # tighter: B and C get 2 each and freeze; A then takes what link 0 has left, 10 - 2 = 8.
    A = np.array([[1, 0], [1, 1], [0, 1]])
    x = max_min_shares(A, np.full(3, 10.0), np.array([10.0, 4.0]))
    assert np.allclose(x, [8.0, 2.0, 2.0])


def test_loads_that_fit_are_served_in_full():
    A = np.array([[1, 0], [1, 1]])
    assert max_min_shares(A, np.array([3.0, 5.0]), np.array([10.0, 5.0])).tolist() == [3.0, 5.0]
    assert max_min_shares(np.zeros((2, 0)), np.array([0.0, 1.0]), np.zeros(0)).tolist() == [0.0, 1.0]


def is_max_min_fair(A: np.ndarray, d: np.ndarray, cap: np.ndarray, x: np.ndarray, tol=1e-7) -> bool:
    """The bottleneck characterisation (Bertsekas & Gallager, §6.5.2), knowing nothing of how
    ``x`` was computed: feasible, and every job below its load crosses a full link on which no
    job gets more than it."""
    if np.any(x < -tol) or np.any(x > d + tol) or np.any(A.T @ x > cap + tol * np.maximum(cap, 1)):
        return False
    load = A.T @ x
    for j in np.flatnonzero(x < d - tol * np.maximum(d, 1)):
        ok = False
        for link in np.flatnonzero(A[j]):
            users = np.flatnonzero(A[:, link])
            if load[link] >= cap[link] * (1 - 1e-9) - tol and x[j] >= x[users].max() - tol * max(x[users].max(), 1):
                ok = True
        if not ok:
            return False
    return True


@st.composite
def link_instances(draw):
    n = draw(st.integers(1, 6))
    m = draw(st.integers(1, 4))
    A = np.array(draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m), min_size=n, max_size=n)), float)
    mag = st.sampled_from([1e-3, 0.5, 1.0, 2.0, 7.0, 10.0, 1e4])
    d = np.array(draw(st.lists(mag | st.just(0.0), min_size=n, max_size=n)))
    cap = np.array(draw(st.lists(mag, min_size=m, max_size=m)))
    return A, d, cap


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(link_instances())
def test_shares_are_max_min_fair(inst):
    A, d, cap = inst
    x = max_min_shares(sp.csr_matrix(A), d, cap)
    assert is_max_min_fair(A, d, cap, x)


def test_bad_link_input():
    with pytest.raises(ValidationError, match="`capacity` must be positive"):
        max_min_shares(np.ones((1, 1)), np.ones(1), np.zeros(1))
    with pytest.raises(ValidationError, match="`demand` must be finite and >= 0"):
        max_min_shares(np.ones((1, 1)), np.array([-1.0]), np.ones(1))
    with pytest.raises(ValidationError, match="shape"):
        max_min_shares(np.ones((2, 1)), np.ones(1), np.ones(1))


def test_spread_links_cross_racks_only_when_spanning_them():
    rack = np.array([0, 0, 1])
    A, cap = spread_links([np.array([0, 1]), np.array([1, 2]), np.array([2])], rack, 3, 2, 10.0, 4.0)
    # job 0: servers 0, 1 (one rack); job 1: servers 1, 2 and racks 0, 1; job 2: one server, nothing
    assert A.toarray().tolist() == [[1, 1, 0, 0, 0], [0, 1, 1, 1, 1], [0, 0, 0, 0, 0]]
    assert cap.tolist() == [10.0, 10.0, 10.0, 4.0, 4.0]


# ---------------------------------------------------------------- rate factors
def test_bandwidth_factor_of_a_poor_pair_by_hand():
    c = hs.Cluster.from_servers({"v100": 8}, gpus_per_server=8)
    ic = Interconnect({"dgx": preset_graph("dgx1_v100")}, types={"v100": "dgx"})
    # only GPUs 0 and 1 usable: the pair has one NVLink, 25 GB/s; the best pair of a DGX-1 has 50.
    # With c = 0.5: f = 1 / ((1 - 0.5) + 0.5 * 50 / 25) = 1 / 1.5 = 2/3.
    p = place(c, ["a"], ["v100"], [2], blocked=[2, 3, 4, 5, 6, 7], interconnect=ic, comm_intensity=0.5)
    assert p.bandwidth[0] == 25.0
    f = rate_factors(p, ic.bind(c.topology), np.array([0.5]))
    assert math.isclose(f[0], 2 / 3)
    # on the best pair, or with c = 0, no slowdown
    q = place(c, ["a"], ["v100"], [2], interconnect=ic, comm_intensity=0.5)
    assert q.bandwidth[0] == 50.0 and rate_factors(q, ic.bind(c.topology), np.array([0.5]))[0] == 1.0
    assert rate_factors(p, ic.bind(c.topology), np.array([0.0]))[0] == 1.0


def test_contention_factor_of_two_gangs_sharing_a_server_by_hand():
    # three servers of 4 GPUs (one rack), uplinks 10 GB/s. A (6 GPUs, c = 1) on s0 (4) + s1 (2),
    # B (6 GPUs, c = 0.5) on s1 (2) + s2 (4): loads a_A = 1 * 10 = 10, a_B = 0.5 * 10 = 5. Links:
    # s0 {A}, s1 {A, B}, s2 {B}, each 10. On s1 equal shares are 5 each; B is at its load (5) and
    # freezes; A gets the 5 left on s1. x = (5, 5): f_A = 5 / 10 = 0.5, f_B = 5 / 5 = 1.
    c = hs.Cluster.from_servers({"k80": 12}, gpus_per_server=4)
    ic = Interconnect({"p4": preset_graph("pcie4")}, types={"k80": "p4"}, server_uplink_gb_s=10.0)
    prev = {"A": [("k80-s0", i) for i in range(4)] + [("k80-s1", 0), ("k80-s1", 1)],
            "B": [("k80-s1", 2), ("k80-s1", 3)] + [("k80-s2", i) for i in range(4)]}
    p = place(c, ["A", "B"], ["k80", "k80"], [6, 6], previous=prev, split_large_jobs=True, interconnect=ic,
              comm_intensity=[1.0, 0.5])
    assert p.as_mapping() == prev and p.servers_used.tolist() == [2, 2]
    f = rate_factors(p, ic.bind(c.topology), np.array([1.0, 0.5]))
    assert np.allclose(f, [0.5, 1.0])
    # a ring through NICs runs at the uplink at best: predicted bandwidth min(12 GB/s PCIe, 10)
    assert p.bandwidth.tolist() == [10.0, 10.0]


# ---------------------------------------------------------------- the placement cost
def test_network_cost_keeps_the_heavy_gang_whole():
    # two servers of 8. X (6 GPUs, c = 0.5), L (5, c = 0.1), H (5, c = 0.9): 16 GPUs, so one gang
    # spans servers. Spreading costs (spread + network * c) per GPU: X (10 + 20 * .5) * 6 = 120,
    # L (10 + 2) * 5 = 60, H (10 + 18) * 5 = 140: L is spread. Without the network term every
    # gang pays 10 per GPU and the 5-gangs tie (50 < 60 for X); the read-back then serves them
    # in plan order, L first, so H is the one spread.
    c = hs.Cluster.from_servers({"v100": 16}, gpus_per_server=8)
    ids, types, sizes, comm = ["X", "L", "H"], ["v100"] * 3, [6, 5, 5], [0.5, 0.1, 0.9]
    aware = place(c, ids, types, sizes, comm_intensity=comm, costs=PlacementCosts(network=20.0))
    blind = place(c, ids, types, sizes, comm_intensity=comm)
    assert aware.servers_used.tolist() == [1, 2, 1]
    assert blind.servers_used.tolist() == [1, 1, 2]
    with pytest.raises(ValidationError, match=r"`comm_intensity` must be in \[0, 1\]; job 'H' has 1.5"):
        place(c, ids, types, sizes, comm_intensity=[0.5, 0.1, 1.5])
    with pytest.raises(ValidationError, match="`patterns` entries must be one of"):
        place(c, ids, types, sizes, patterns=["ring", "ring", "tree"])


# ---------------------------------------------------------------- the simulator
def small_case(n=12, seed=2):
    w = hs.generate_workload(n, rate_per_hour=20.0, seed=seed)
    c = hs.Cluster.from_servers({"v100": 16, "p100": 8, "k80": 8}, gpus_per_server=8, servers_per_rack=1)
    ic = Interconnect({"dgx": preset_graph("dgx1_v100"), "pcie": preset_graph("pcie8")},
                      types={"v100": "dgx", "p100": "dgx", "k80": "pcie"}, server_uplink_gb_s=12.5,
                      rack_uplink_gb_s=12.5)
    return w, c, ic


def test_no_communication_changes_nothing():
    # c = 0 for every job: every factor is 1 and the network term 0, and the inside-server choice
    # only renames GPUs within servers, so the run is the run without a network model.
    w, c, ic = small_case()
    plain = hs.simulate("max_min_fairness", w, c, options=hs.SimOptions(round_seconds=600.0))
    net = hs.simulate("max_min_fairness", w, c, options=hs.SimOptions(
        round_seconds=600.0, network=NetworkAware(ic, comm_intensity=0.0)))
    assert np.allclose(plain.jobs["jct_s"].to_numpy(), net.jobs["jct_s"].to_numpy())
    assert plain.summary["migrations"] == net.summary["migrations"]


def test_communication_slows_jobs_and_tables_by_trace_id():
    w, c, ic = small_case()
    ids = [str(i) for i in w.jobs.ids.tolist()]
    opts = hs.SimOptions(round_seconds=600.0)
    plain = hs.simulate("max_min_fairness", w, c, options=opts)
    # every job fully communication-bound on a PCIe-only cluster's poor links can only be slower
    table = {i: 1.0 for i in ids}
    net = hs.simulate("max_min_fairness", w, c, options=opts.replace(network=NetworkAware(ic, comm_intensity=table)))
    assert net.summary["avg_jct_s"] >= plain.summary["avg_jct_s"] - 1e-6
    assert net.summary["n_completed"] == plain.summary["n_completed"] == len(ids)
    # the default comes from the workload's unconsolidated throughputs
    dflt = hs.simulate("max_min_fairness", w, c, options=opts.replace(network=NetworkAware(ic)))
    assert dflt.summary["n_completed"] == len(ids)
    with pytest.raises(ValidationError, match=r"`comm_intensity` must give a value for every job; missing \['j0'\]"):
        hs.simulate("max_min_fairness", w, c, options=opts.replace(
            network=NetworkAware(ic, comm_intensity={i: 0.1 for i in ids[1:]})))
    with pytest.raises(ValidationError, match="names jobs the workload does not have: \\['nobody'\\]"):
        hs.simulate("max_min_fairness", w, c, options=opts.replace(
            network=NetworkAware(ic, comm_intensity={**table, "nobody": 0.1})))
    with pytest.raises(ValidationError, match=r"`patterns\['j0'\]` must be one of"):
        hs.simulate("max_min_fairness", w, c, options=opts.replace(
            network=NetworkAware(ic, patterns={i: "tree" for i in ids})))


def test_network_option_rules():
    _, c, ic = small_case()
    with pytest.raises(ValidationError, match="`network` must be a hetsched.placement.NetworkAware"):
        hs.SimOptions(network=ic)
    with pytest.raises(ValidationError, match="`network` needs placement"):
        hs.SimOptions(network=NetworkAware(ic), placement=False)
    with pytest.raises(ValidationError, match="`comm_intensity` must be a number in \\[0, 1\\]; got 2"):
        NetworkAware(ic, comm_intensity=2)
    with pytest.raises(ValidationError, match="`network_cost` must be a finite number >= 0"):
        NetworkAware(ic, network_cost=-1.0)
    from hetsched.sim.replay import simulate_online

    with pytest.raises(ValidationError, match="runs in hetsched.simulate only"):
        simulate_online("max_min_fairness", hs.generate_workload(2, rate_per_hour=4.0, seed=0), c,
                        options=hs.SimOptions(network=NetworkAware(ic, comm_intensity=0.1)))
    jobs = hs.JobSet([[1.0]], gpu_types=["v100"], scale_factors=[2], steps_remaining=[100.0])
    with pytest.raises(ValidationError, match="`comm_intensity` is needed"):
        hs.simulate("max_min_fairness", jobs, hs.Cluster.from_servers({"v100": 8}, gpus_per_server=8),
                    options=hs.SimOptions(network=NetworkAware(Interconnect({"d": preset_graph("dgx1_v100")},
                                                                            types={"v100": "d"}))))
    with pytest.raises(ValidationError, match="`network` needs placement: give the cluster servers"):
        hs.simulate("max_min_fairness", jobs, hs.Cluster({"v100": 8}),
                    options=hs.SimOptions(network=NetworkAware(ic, comm_intensity=0.2)))


def test_cli_interconnect(tmp_path, capsys):
    spec = {"graphs": {"dgx": {"preset": "dgx1_v100"}, "pcie": {"preset": "pcie8"}},
            "types": {"v100": "dgx", "k80": "pcie"}, "server_uplink_gb_s": 12.5}
    path = tmp_path / "ic.json"
    path.write_text(json.dumps(spec))
    base = ["simulate", "--jobs", "6", "--cluster", "v100=16,k80=8", "--gpus-per-server", "8", "--round-seconds", "900"]
    assert main([*base, "--interconnect", str(path), "--network-cost", "5"]) == 0
    assert "simulated hours" in capsys.readouterr().out
    assert main([*base, "--network-cost", "5"]) == 2
    assert "needs --interconnect" in capsys.readouterr().err
    spec["graphs"]["dgx"] = {"bandwidth_gb_s": [[0, 1], [2, 0]]}
    path.write_text(json.dumps(spec))
    assert main([*base, "--interconnect", str(path)]) == 2
    assert "must be symmetric" in capsys.readouterr().err


def test_cli_interconnect_from_topology_levels(tmp_path, capsys):
    from hetsched.inputs import topology as topo_mod

    if not hasattr(topo_mod, "read_topology"):
        pytest.skip("no multi-level topology files in this checkout")
    topo = {"levels": [{"name": "pair", "size": 2, "bandwidth": 50}, {"name": "socket", "size": 2, "bandwidth": 25},
                       {"name": "server", "bandwidth": 10}, {"name": "rack", "bandwidth": 12.5}],
            "counts": {"v100": 16, "k80": 8}, "gpus_per_server": 8, "servers_per_rack": 2}
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(topo))
    args = ["simulate", "--jobs", "5", "--round-seconds", "900", "--topology", str(path)]
    assert main([*args, "--interconnect", "topology"]) == 0
    assert "simulated hours" in capsys.readouterr().out
    assert main(["simulate", "--jobs", "5", "--cluster", "v100=8", "--interconnect", "topology"]) == 2
    assert "no --topology is given" in capsys.readouterr().err
