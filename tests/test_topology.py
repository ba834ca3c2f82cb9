"""Topology (servers, racks, GPU ids) and Cluster.from_servers."""

from __future__ import annotations

import numpy as np
import pytest

from hetsched import Cluster, ValidationError
from hetsched.inputs.topology import Server, Topology


def test_from_counts_cuts_servers_and_racks():
    topo = Topology.from_counts({"v100": 20, "k80": 8}, gpus_per_server=8, servers_per_rack=2)
    assert topo.server_names == ("v100-s0", "v100-s1", "v100-s2", "k80-s0")
    assert topo.server_gpus.tolist() == [8, 8, 4, 8]
    assert [topo.rack_names[r] for r in topo.server_rack] == ["v100-r0", "v100-r0", "v100-r1", "k80-r0"]
    assert topo.counts() == {"v100": 20, "k80": 8}
    assert topo.n_gpus == 28
    assert topo.gpu_offset.tolist() == [0, 8, 16, 20, 28]


def test_gpus_per_server_per_type_and_zero_count():
    topo = Topology.from_counts({"a": 8, "b": 0, "c": 6}, gpus_per_server={"a": 4, "b": 8, "c": 4})
    assert topo.gpu_types == ("a", "b", "c")
    assert topo.server_gpus.tolist() == [4, 4, 4, 2]
    assert topo.counts() == {"a": 8, "b": 0, "c": 6}


def test_gpu_ids_round_trip():
    topo = Topology([Server("x", "a", 2, "r0"), ("y", "b", 4, "r1"), {"name": "z", "gpu_type": "a", "num_gpus": 3}])
    seen = set()
    for g in range(topo.n_gpus):
        name, local = topo.gpu_label(g)
        assert topo.gpu_id(name, local) == g
        seen.add((name, local))
    assert len(seen) == 9
    assert topo.gpu_id(1, 3) == 5
    assert topo.to_frame()["rack"].tolist() == ["r0", "r1", "rack0"]


@pytest.mark.parametrize(
    "servers, match",
    [
        ([], "at least one server"),
        ([("x", "a", 0)], "num_gpus"),
        ([("x", "a", 2), ("x", "a", 2)], "unique"),
        ([("x", "", 2)], "gpu_type"),
        ([("x", "a", 2, "")], "rack"),
        ([42], "servers\\[0\\]"),
        ([{"name": "x", "num_gpus": 2}], "gpu_type"),
    ],
)
def test_bad_servers(servers, match):
    with pytest.raises(ValidationError, match=match):
        Topology(servers)


def test_bad_counts_and_lookups():
    with pytest.raises(ValidationError, match="gpus_per_server"):
        Topology.from_counts({"a": 8}, gpus_per_server=0)
    with pytest.raises(ValidationError, match="servers_per_rack"):
        Topology.from_counts({"a": 8}, servers_per_rack=0)
    with pytest.raises(ValidationError, match="counts\\['a'\\]"):
        Topology.from_counts({"a": -1})
    with pytest.raises(ValidationError, match="missing 'b'"):
        Topology.from_counts({"a": 8, "b": 8}, gpus_per_server={"a": 8})
    with pytest.raises(ValidationError, match="not in `gpu_types`"):
        Topology([("x", "a", 2)], gpu_types=["b"])
    topo = Topology.from_counts({"a": 8})
    with pytest.raises(ValidationError, match="unknown server 'nope'"):
        topo.server_index("nope")
    with pytest.raises(ValidationError, match="GPUs 0..7; got index 8"):
        topo.gpu_id("a-s0", 8)
    with pytest.raises(ValidationError, match="GPU type 'h100'"):
        topo.type_index("h100")


def test_cluster_from_servers_keeps_cluster_behaviour():
    plain = Cluster({"v100": 16, "k80": 8})
    assert plain.topology is None
    c = Cluster.from_servers({"v100": 16, "k80": 8}, gpus_per_server=8, prices={"v100": 2.0})
    assert c.as_dict() == {"v100": 16, "k80": 8}
    assert c.topology.n_servers == 3
    assert c.prices == {"v100": 2.0}
    assert Cluster.from_servers({"v100": 16, "k80": 8}) == plain  # equality: counts and prices, as before
    topo = Topology([("s0", "a", 4, "r0"), ("s1", "b", 8, "r0")])
    c2 = Cluster.from_servers(topo)
    assert c2.topology is topo and c2.as_dict() == {"a": 4, "b": 8}
    c3 = Cluster.from_servers([Server("s0", "a", 4)], gpu_types=["a", "b"])
    assert c3.as_dict() == {"a": 4, "b": 0}
    with pytest.raises(ValidationError, match="must match the topology"):
        Cluster.from_servers(topo, gpu_types=["b", "a"])
    assert np.array_equal(c2.counts, [4, 8])
