"""Topology levels (issue 26 item 1): declared levels, unit arrays, bandwidths, files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.inputs.topology import Level, Server, Topology, read_topology

NVLINK = [Level("pair", size=2, bandwidth=300.0), Level("switch", size=2, bandwidth=32.0),
          Level("server", bandwidth=25.0), Level("rack", bandwidth=12.5)]


def test_default_levels_are_server_and_rack():
    topo = Topology.from_counts({"v100": 16, "k80": 8}, gpus_per_server=8, servers_per_rack=1)
    assert topo.level_names == ("gpu", "server", "rack")
    # units of "server" are the servers, of "rack" the racks
    assert np.array_equal(topo.gpu_unit[1], topo.gpu_server)
    assert topo.n_units("rack") == topo.n_racks == 3
    assert topo.unit_gpus[1].tolist() == [8, 8, 8]


def test_units_by_hand():
    # 2 servers of 8 V100s in one rack: pairs {0,1},{2,3},...; switches {0..3},{4..7},...
    topo = Topology.from_counts({"v100": 16}, gpus_per_server=8, levels=NVLINK)
    assert topo.level_names == ("gpu", "pair", "switch", "server", "rack")
    assert topo.gpu_unit[1].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    assert topo.gpu_unit[2].tolist() == [0] * 4 + [1] * 4 + [2] * 4 + [3] * 4
    assert topo.unit_parent[1].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]      # pair -> switch
    assert topo.unit_parent[2].tolist() == [0, 0, 1, 1]                  # switch -> server
    assert topo.unit_parent[4].tolist() == [-1]                          # the top level
    assert topo.unit_children[3].tolist() == [2, 2]                      # 2 switches per server
    assert topo.unit_name("switch", 3) == "v100-s1/switch1"
    # GPU 0 and 1 share a pair (300 GB/s), 0 and 2 a switch, 0 and 5 a server, 0 and 9 the rack
    assert topo.common_level([0, 0, 0, 0, 0], [0, 1, 2, 5, 9]).tolist() == [0, 1, 2, 3, 4]
    assert topo.link_bandwidth([0, 0, 0, 0], [1, 2, 5, 9]).tolist() == [300.0, 32.0, 25.0, 12.5]


def test_per_type_sizes_partial_units_and_mixed_racks():
    # a v100 server of 8 in pairs, a k80 server of 4 with no pairs (size 1), one rack of both,
    # and a v100 server of 6 whose last switch (4-GPU units) is partial
    topo = Topology([Server("a", "v100", 8, "r0"), Server("b", "k80", 4, "r0"), Server("c", "v100", 6, "r1")],
                    levels=[Level("pair", size={"v100": 2, "k80": 1}), Level("switch", size=2), Level("server"),
                            Level("rack")])
    assert topo.unit_gpus[2].tolist() == [4, 4, 2, 2, 4, 2]        # a: 4,4; b: 2,2 (k80 pairs are 1 GPU); c: 4,2
    assert topo.unit_type[4].tolist() == [-1, 0]                   # rack r0 mixes types
    assert topo.unit_type[3].tolist() == [0, 1, 0]


def test_levels_above_the_rack():
    topo = Topology.from_counts({"v100": 64}, gpus_per_server=8, servers_per_rack=2,
                                levels=[Level("server"), Level("rack"), Level("pod", size=2, bandwidth=5.0)])
    assert topo.n_units("pod") == 2 and topo.unit_gpus[3].tolist() == [32, 32]
    assert topo.link_bandwidth([0], [32]).tolist() != topo.link_bandwidth([0], [16]).tolist()
    assert np.isnan(topo.link_bandwidth([0], [32])[0])            # different pods: no level joins them
    assert topo.link_bandwidth([0], [16]).tolist() == [5.0]


@pytest.mark.parametrize("levels, match", [
    ([Level("pair", size=2)], "must include level 'server'"),
    ([Level("rack"), Level("server")], "'rack' must come after level 'server'"),
    ([Level("server", size=2)], "takes no `size`"),
    ([Level("pair"), Level("server")], "needs a `size`"),
    ([Level("gpu", size=1), Level("server")], "level 0"),
    ([Level("server"), Level("server")], "unique"),
    ([Level("pair", size=0), Level("server")], "positive integer"),
    ([Level("pair", size=2, bandwidth=-1.0), Level("server")], "bandwidth"),
    ([Level("pair", size={"v100": 2}), Level("server")], "missing \\['k80'\\]"),
    ([Level("server"), Level("pod", size={"v100": 2})], "must be one integer"),
    ([Level("server"), Level("half", size=3), Level("rack")], "must each lie inside one unit"),
])
def test_bad_levels(levels, match):
    with pytest.raises(ValidationError, match=match):
        Topology.from_counts({"v100": 32, "k80": 8}, gpus_per_server=8, servers_per_rack=2, levels=levels)


def test_existing_constructors_and_cluster(tmp_path):
    c = hs.Cluster.from_servers({"v100": 16}, gpus_per_server=8, levels=NVLINK)
    assert c.topology.level_names[1] == "pair"
    again = hs.Cluster.from_servers(c.topology.with_levels(None))
    assert again.topology.level_names == ("gpu", "server", "rack")
    spec = c.topology.to_dict()
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(spec))
    assert read_topology(path) == c.topology
    (tmp_path / "counts.json").write_text(json.dumps({"counts": {"v100": 16}, "gpus_per_server": 8,
                                                      "levels": [{"name": "server"}]}))
    assert read_topology(tmp_path / "counts.json").level_names == ("gpu", "server")
    (tmp_path / "bad.json").write_text(json.dumps({"counts": {"v100": 8}, "servers": []}))
    with pytest.raises(ValidationError, match="exactly one of 'servers' and 'counts'"):
        read_topology(tmp_path / "bad.json")
    with pytest.raises(ValidationError, match="not valid JSON"):
        (tmp_path / "x.json").write_text("{")
        read_topology(tmp_path / "x.json")


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(1, 9), min_size=1, max_size=6), pair=st.integers(1, 3), switch=st.integers(1, 3),
       spr=st.integers(1, 3))
def test_units_nest_and_partition(sizes, pair, switch, spr):
    """On servers of any size: every level partitions the GPUs, units nest, and the common
    level of two GPUs is the lowest level whose unit ids agree (checked pair by pair)."""
    servers = [Server(f"s{i}", "v100", n, f"r{i // spr}") for i, n in enumerate(sizes)]
    topo = Topology(servers, levels=[Level("pair", size=pair), Level("switch", size=switch), Level("server"),
                                     Level("rack")])
    n = topo.n_gpus
    for li in range(topo.n_levels):
        assert topo.unit_gpus[li].sum() == n
        if li + 1 < topo.n_levels:
            assert (topo.unit_parent[li][topo.gpu_unit[li]] == topo.gpu_unit[li + 1]).all()
    # inside-server units hold at most pair (x switch) GPUs
    assert topo.unit_gpus[1].max() <= pair and topo.unit_gpus[2].max() <= pair * switch
    a, b = np.meshgrid(np.arange(n), np.arange(n))
    common = topo.common_level(a.ravel(), b.ravel())
    same_server = topo.gpu_server[a.ravel()] == topo.gpu_server[b.ravel()]
    assert ((common <= 3) == same_server).all()
    assert (common[a.ravel() == b.ravel()] == 0).all()
