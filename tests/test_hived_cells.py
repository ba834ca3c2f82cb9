"""HiveD's cells and buddy allocation (issue 26 item 2): hand-derived split/merge sequences,
an independent checker on random sequences, and chain_fits against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.errors import ValidationError
from hetsched.hived import BuddyAllocator, CellForest, Tenants, chain_fits
from hetsched.inputs.topology import Level, Server, Topology

LEVELS = [Level("pair", size=2), Level("switch", size=2), Level("server"), Level("rack")]


def one_server_forest():
    return CellForest.build(Topology.from_counts({"v100": 8}, gpus_per_server=8, levels=LEVELS[:3]))


def test_forest_by_hand():
    f = one_server_forest()
    # ids: GPUs 0..7, pairs 8..11, switches 12..13, the server 14
    assert f.n_cells == 15
    assert f.level.tolist() == [0] * 8 + [1] * 4 + [2] * 2 + [3]
    assert f.children(14).tolist() == [12, 13] and f.children(13).tolist() == [10, 11]
    assert f.gpus(13).tolist() == [4, 5, 6, 7] and f.gpus(9).tolist() == [2, 3]
    assert f.roots().tolist() == [14]
    assert f.sizes.tolist() == [[1, 2, 4, 8]]
    assert f.cell_level(0, 3) == 2 and f.cell_level(0, 9) == -1


def test_buddy_split_merge_sequence_by_hand():
    f = one_server_forest()
    b = BuddyAllocator(f)
    # a GPU: split server 14 -> switch 12 (13 free) -> pair 8 (9 free) -> GPU 0 (1 free)
    assert b.allocate(0, 0) == 0
    assert b.free_cells().tolist() == [1, 9, 13]
    assert b.allocate(0, 1) == 9            # a pair: the free pair 9, no split
    assert b.allocate(0, 2) == 13           # a switch: the free switch 13
    assert b.free_cells().tolist() == [1]
    assert b.allocate(0, 1) == -1           # no free pair or anything above it: GPU 1 alone is free
    b.release(9)                            # pair 9's buddy (pair 8) is split: no merge
    assert b.free_cells().tolist() == [1, 9]
    b.release(0)                            # GPU 0 + GPU 1 -> pair 8; + pair 9 -> switch 12; switch 13 is taken
    assert b.free_cells().tolist() == [12]
    b.release(13)                           # switch 12 + 13 -> the server
    assert b.free_cells().tolist() == [14]
    assert b.free_counts(0).tolist() == [8, 4, 2, 1]
    with pytest.raises(ValidationError, match="not allocated"):
        b.release(13)


def test_reserve_takes_a_specific_cell():
    f = one_server_forest()
    b = BuddyAllocator(f)
    assert b.reserve(5)                    # GPU 5: server -> switch 13 -> pair 10 split down to GPU 5
    assert b.free_cells().tolist() == [4, 11, 12]
    assert not b.reserve(13)               # the switch holding GPU 5 is no longer free
    assert b.allocate(0, 2) == 12
    assert b.allocate(0, 1) == 11
    b.release(5)
    assert b.free_cells().tolist() == [10]


def _check_invariants(f, b, held):
    """Independent checker: held cells are disjoint; free + held GPUs = all GPUs; no two
    buddies are both maximal free (they would have merged)."""
    gpus = np.concatenate([f.gpus(c) for c in held] + [np.zeros(0, np.int64)])
    assert np.unique(gpus).shape == gpus.shape
    free = b.free_cells()
    fg = np.concatenate([f.gpus(c) for c in free] + [np.zeros(0, np.int64)])
    assert np.intersect1d(fg, gpus).size == 0
    assert fg.shape[0] + gpus.shape[0] == f.topology.n_gpus
    for p in range(f.n_cells):
        kids = f.children(p)
        if kids.size:
            assert not np.isin(kids, free).all()


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 50)), max_size=60),
       sizes=st.lists(st.sampled_from([4, 8, 6]), min_size=1, max_size=4))
def test_buddy_random_sequences(ops, sizes):
    """Random allocate/release on servers of 4, 8 and 6 GPUs (6: a partial switch, so
    roots at several levels): allocation succeeds iff the checker finds a free cell of the
    level or above, and the invariants hold after every step."""
    topo = Topology([Server(f"s{i}", "v100", n, "r0") for i, n in enumerate(sizes)], levels=LEVELS)
    f = CellForest.build(topo)
    b = BuddyAllocator(f)
    held: list[int] = []
    for alloc, lev, pick in ops:
        if alloc or not held:
            lev = min(lev, int(np.count_nonzero(f.sizes[0])) - 1)
            free = b.free_cells()
            expect = bool((f.level[free] >= lev).any())
            c = b.allocate(0, lev)
            assert (c >= 0) == expect
            if c >= 0:
                assert f.level[c] == lev
                held.append(c)
        else:
            b.release(held.pop(pick % len(held)))
        _check_invariants(f, b, held)
    for c in held:
        b.release(c)
    assert sorted(b.free_cells().tolist()) == sorted(f.roots().tolist())


def _brute_fits(sizes, cells, items):
    """Exhaustive: can items (levels) be packed into cells (levels) respecting the hierarchy?
    Each cell of level L is a tree; an item of level l takes a whole level-l sub-cell."""
    cap = [int(sizes[c]) for c in cells]
    # a level-l item occupies an aligned block of S(l) GPUs inside a cell; try all aligned slots
    slots = []
    for ci, c in enumerate(cells):
        slots.append(np.zeros(cap[ci], dtype=bool))

    def place(i):
        if i == len(items):
            return True
        s = int(sizes[items[i]])
        for ci in range(len(cells)):
            if s > cap[ci]:
                continue
            for off in range(0, cap[ci], s):
                if not slots[ci][off:off + s].any():
                    slots[ci][off:off + s] = True
                    if place(i + 1):
                        return True
                    slots[ci][off:off + s] = False
        return False

    return place(0)


@settings(max_examples=150, deadline=None)
@given(cells=st.lists(st.integers(0, 3), max_size=3), items=st.lists(st.integers(0, 3), max_size=5),
       branching=st.sampled_from([(2, 2, 2), (2, 3, 2), (4, 1, 2)]))
def test_chain_fits_matches_brute_force(cells, items, branching):
    sizes = np.cumprod([1, *branching])
    assert chain_fits(sizes, cells, items) == _brute_fits(sizes, cells, sorted(items, reverse=True))


def test_chain_fits_is_monotone_by_hand():
    sizes = np.array([1, 2, 4, 8])
    assert chain_fits(sizes, [3], [2, 1, 0, 0])        # 4 + 2 + 1 + 1 = 8 in a server
    assert not chain_fits(sizes, [3], [2, 1, 0, 0, 0])
    for sub in itertools.combinations([2, 1, 0, 0], 3):
        assert chain_fits(sizes, [3], list(sub))


def test_tenants_safety_check_by_hand():
    # 2 racks of 2 servers of 8 (pairs, switches): 4 server cells, 2 rack cells
    topo = Topology.from_counts({"v100": 32}, gpus_per_server=8, servers_per_rack=2, levels=LEVELS)
    f = CellForest.build(topo)
    ok = Tenants.from_dict({"tenants": [{"name": "a", "cells": {"v100": {"rack": 1}}},
                                        {"name": "b", "cells": {"v100": {"server": 1, "switch": 2}}}]})
    ok.check(f)
    assert ok.quotas(f).tolist() == [[16], [16]]
    # a rack + 2 servers + one more switch: 16 + 16 + 4 > 32 GPUs
    bad = Tenants.from_dict({"tenants": [{"name": "a", "cells": {"v100": {"rack": 1}}},
                                         {"name": "b", "cells": {"v100": {"server": 2, "switch": 1}}}]})
    with pytest.raises(ValidationError, match=r"tenant 'b' needs a cell at level 'switch'.*1 cell\(s\).*\{'b': 1\}"):
        bad.check(f)
    # a rack and 3 servers: 16 + 24 = 40 GPUs > 32; the 4th server cell is the one missing
    with pytest.raises(ValidationError, match=r"tenant 'b' needs a cell at level 'server'.*has 4 v100 cell"):
        Tenants.from_dict({"tenants": [{"name": "a", "cells": {"v100": {"rack": 1}}},
                                       {"name": "b", "cells": {"v100": {"server": 3}}}]}).check(f)
    with pytest.raises(ValidationError, match="level 'socket', which the topology lacks"):
        Tenants.from_dict({"tenants": [{"name": "a", "cells": {"v100": {"socket": 1}}}]}).check(f)
    with pytest.raises(ValidationError, match="GPU type 'a100'"):
        Tenants.from_dict({"tenants": [{"name": "a", "cells": {"a100": {"server": 1}}}]}).check(f)
    with pytest.raises(ValidationError, match="must be unique"):
        Tenants.from_dict({"tenants": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ValidationError, match="priority"):
        Tenants.from_dict({"tenants": [{"name": "a", "priority": "high"}]})
    with pytest.raises(ValidationError, match="non-negative integer"):
        Tenants.from_dict({"tenants": [{"name": "a", "cells": {"v100": {"server": -1}}}]})


def test_chain_fits_matches_brute_force_exhaustively():
    """Every multiset of up to 3 free cells and 4 requests over 4 levels, five branchings
    (1 included: a level as large as the one below): 12,250 cases, no disagreement."""
    n = 0
    for branching in [(2, 2, 2), (2, 3, 2), (4, 1, 2), (1, 2, 2), (3, 1, 1)]:
        sizes = np.cumprod([1, *branching])
        for nc in range(4):
            for cells in itertools.combinations_with_replacement(range(4), nc):
                for ni in range(5):
                    for items in itertools.combinations_with_replacement(range(4), ni):
                        n += 1
                        assert chain_fits(sizes, list(cells), list(items)) == _brute_fits(
                            sizes, list(cells), sorted(items, reverse=True)), (branching, cells, items)
    assert n == 12250
