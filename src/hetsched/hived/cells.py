r"""HiveD's cells: per GPU type a cell hierarchy over the topology's levels, and the buddy
allocator that splits and merges them.

Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning Guaranteed", OSDI 2020, §3
(cells and the cell hierarchy) and §4 (buddy cell allocation, Algorithm 1).

Cells
-----
A *cell* of level :math:`l` is a unit of the topology's level :math:`l`
(:mod:`hetsched.inputs.topology`, "Levels") whose GPUs all have one type :math:`t`, that
holds the full cell size :math:`S_t(l)` of that type and level (the largest unit of type
:math:`t` at level :math:`l`), and whose children are all cells of level :math:`l - 1`.
Level 0 cells are single GPUs. A unit that is partial (a smaller last server, a short rack)
or that mixes types is not a cell: its child cells are *roots* of the forest (HiveD's
top-level physical cells may be of any level, §3). Per type, the cell sizes form a
divisible chain :math:`S_t(0) = 1 \mid S_t(1) \mid \dots`, which is what makes buddy
allocation exact.

Buddy allocation (§4)
-----------------------
The allocator keeps, per type and level, the *free list*: the cells that are free while
their parent is not (maximal free cells). To allocate a cell of level :math:`l`:

* take the free cell of level :math:`l` with the lowest id (cells are numbered in GPU order,
  so allocations pack towards low GPU ids);
* else take the lowest free cell of the lowest level :math:`l' > l` that has one and
  *split* it: keep its first child on the path down, put the other children on the free
  list of level :math:`l' - 1`, and repeat until level :math:`l`;
* else fail (``-1``): no cell of level :math:`\ge l` is free.

To free a cell, put it back and *merge*: while every child of its parent is free, take the
children off their free list and free the parent instead. Both operations touch one path
of the hierarchy: :math:`O(\text{depth} \cdot \log n)` with the heaps used for the free lists
(lazy deletion).

A specific cell can be taken with :meth:`BuddyAllocator.reserve` (its largest free
ancestor is split down to it): this is how HiveD keeps a bound cell where it was and how a
failed GPU is taken out of service (§4, "bad hardware": the GPU's level-0 cell is
reserved for ever, so no cell that contains it is ever free again).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..inputs.topology import Topology
from ..validation import check_int

__all__ = ["BuddyAllocator", "CellForest"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class CellForest:
    """The physical cells of a topology, per GPU type (see the module docstring).

    Attributes
    ----------
    topology : Topology
    level : ndarray of int64
        Topology level index of each cell.
    gpu_type : ndarray of int64
        Type index (into ``topology.gpu_types``) of each cell.
    unit : ndarray of int64
        Unit of the cell at its level (``topology.gpu_unit[level] == unit`` are its GPUs).
    parent : ndarray of int64
        Parent cell, -1 for a root.
    child_ptr, child_ids : ndarray of int64
        Children of cell ``c``: ``child_ids[child_ptr[c]:child_ptr[c + 1]]`` (ascending).
    leaf_lo, leaf_hi : ndarray of int64
        The cell's GPUs are ``leaf_order[leaf_lo[c]:leaf_hi[c]]``.
    leaf_order : ndarray of int64
        Global GPU ids in cell order (every cell's GPUs contiguous).
    gpu_cell : ndarray of int64
        Level-0 cell of each GPU.
    sizes : ndarray of int64, shape (n_types, n_levels)
        :math:`S_t(l)`, GPUs of a cell of type ``t`` at level ``l``; 0: no cell there.
    """

    topology: Topology
    level: np.ndarray
    gpu_type: np.ndarray
    unit: np.ndarray
    parent: np.ndarray
    child_ptr: np.ndarray
    child_ids: np.ndarray
    leaf_lo: np.ndarray
    leaf_hi: np.ndarray
    leaf_order: np.ndarray
    gpu_cell: np.ndarray
    sizes: np.ndarray

    @classmethod
    def build(cls, topology: Topology) -> CellForest:
        """The cell forest of ``topology``."""
        if not isinstance(topology, Topology):
            raise ValidationError(f"`topology` must be a hetsched Topology; got {type(topology).__name__}.")
        topo = topology
        n_l, n_t = topo.n_levels, len(topo.gpu_types)
        sizes = np.zeros((n_t, n_l), dtype=np.int64)
        is_cell: list[np.ndarray] = []
        for li in range(n_l):
            ut, ug = topo.unit_type[li], topo.unit_gpus[li]
            if li == 0:
                ok = np.ones(ug.shape[0], dtype=bool)
                sizes[:, 0] = 1
            else:
                kids_ok = np.bincount(topo.unit_parent[li - 1], weights=is_cell[li - 1].astype(float),
                                      minlength=ug.shape[0]) if ug.shape[0] else np.zeros(0)
                typed = ut >= 0
                for t in range(n_t):
                    mine = typed & (ut == t)
                    sizes[t, li] = int(ug[mine].max()) if mine.any() else 0
                full = typed & (ug == sizes[np.maximum(ut, 0), li])
                ok = full & (kids_ok == topo.unit_children[li])
                for t in range(n_t):
                    if not (ok & (ut == t)).any():
                        sizes[t, li] = 0
            is_cell.append(ok)
        # ids: level by level, units in order
        offsets = np.zeros(n_l + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([int(c.sum()) for c in is_cell])
        id_of: list[np.ndarray] = []
        for li in range(n_l):
            ids = np.full(is_cell[li].shape[0], -1, dtype=np.int64)
            ids[is_cell[li]] = offsets[li] + np.arange(int(is_cell[li].sum()))
            id_of.append(ids)
        n = int(offsets[-1])
        level = np.repeat(np.arange(n_l, dtype=np.int64), np.diff(offsets))
        unit = np.concatenate([np.flatnonzero(c) for c in is_cell]).astype(np.int64)
        gtype = np.concatenate([topo.unit_type[li][is_cell[li]] for li in range(n_l)]).astype(np.int64)
        parent = np.full(n, -1, dtype=np.int64)
        for li in range(n_l - 1):
            par_unit = topo.unit_parent[li][is_cell[li]]
            parent[offsets[li]:offsets[li + 1]] = id_of[li + 1][par_unit]
        order = np.argsort(parent, kind="stable")
        has = parent[order] >= 0
        child_ids = order[has].astype(np.int64)
        child_ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(parent[parent >= 0], minlength=n), out=child_ptr[1:])
        # GPUs in cell order: sort by the unit of every level, top level first
        keys = [topo.gpu_unit[li] for li in range(n_l)]
        leaf_order = np.lexsort(keys).astype(np.int64)
        pos = np.empty_like(leaf_order)
        pos[leaf_order] = np.arange(leaf_order.shape[0])
        lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        hi = np.zeros(n, dtype=np.int64)
        for li in range(n_l):
            cell_of_gpu = id_of[li][topo.gpu_unit[li]]
            m = cell_of_gpu >= 0
            np.minimum.at(lo, cell_of_gpu[m], pos[m])
            np.maximum.at(hi, cell_of_gpu[m], pos[m] + 1)
        gpu_cell = id_of[0][topo.gpu_unit[0]]
        forest = cls(topology=topo, level=level, gpu_type=gtype, unit=unit, parent=parent, child_ptr=child_ptr,
                     child_ids=child_ids, leaf_lo=lo, leaf_hi=hi, leaf_order=leaf_order, gpu_cell=gpu_cell,
                     sizes=sizes)
        for arr in (level, gtype, unit, parent, child_ptr, child_ids, lo, hi, leaf_order, gpu_cell, sizes):
            arr.setflags(write=False)
        log.debug("cell forest: %d cells over %d levels, %d roots", n, n_l, int((parent < 0).sum()))
        return forest

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return int(self.level.shape[0])

    def children(self, cell: int) -> np.ndarray:
        """Child cells of ``cell``."""
        return self.child_ids[self.child_ptr[cell]:self.child_ptr[cell + 1]]

    def gpus(self, cell: int) -> np.ndarray:
        """Global GPU ids of ``cell`` (ascending in cell order)."""
        return self.leaf_order[self.leaf_lo[cell]:self.leaf_hi[cell]]

    def size(self, cell: int) -> int:
        """GPUs of ``cell``."""
        return int(self.leaf_hi[cell] - self.leaf_lo[cell])

    def roots(self, gpu_type: int | None = None) -> np.ndarray:
        """Root cells (of one type index, or all)."""
        m = self.parent < 0
        if gpu_type is not None:
            m &= self.gpu_type == gpu_type
        return np.flatnonzero(m)

    def cell_level(self, gpu_type: int, gpus: int) -> int:
        """Lowest level whose cells of ``gpu_type`` hold at least ``gpus`` GPUs; -1 if none."""
        s = self.sizes[gpu_type]
        ok = np.flatnonzero(s >= gpus)
        return int(ok[0]) if ok.size else -1

    def count(self, gpu_type: int, level: int) -> int:
        """Cells of ``gpu_type`` at ``level`` (free or not)."""
        return int(((self.gpu_type == gpu_type) & (self.level == level)).sum())


class BuddyAllocator:
    """Free lists over a :class:`CellForest`; split on allocation, merge on release.

    Parameters
    ----------
    forest : CellForest
    free : sequence of int, optional
        The cells free at the start (disjoint; none inside another). Default: every root.

    Examples
    --------
    One server of 4 GPUs in NVLink pairs: allocating a GPU splits the server and one pair;
    freeing it merges both back.

    >>> from hetsched.inputs.topology import Level, Topology
    >>> topo = Topology.from_counts({"v100": 4}, gpus_per_server=4,
    ...                             levels=[Level("pair", size=2), Level("server")])
    >>> forest = CellForest.build(topo)
    >>> buddy = BuddyAllocator(forest)
    >>> c = buddy.allocate(0, 0)
    >>> forest.gpus(c).tolist(), sorted(buddy.free_cells().tolist())   # GPU 0; GPU 1 and pair 1 free
    ([0], [1, 5])
    >>> buddy.release(c)
    >>> buddy.free_cells().tolist()                                     # the server again
    [6]
    """

    def __init__(self, forest: CellForest, free: Sequence[int] | None = None) -> None:
        if not isinstance(forest, CellForest):
            raise ValidationError(f"`forest` must be a CellForest; got {type(forest).__name__}.")
        self.forest = forest
        n = forest.n_cells
        self._free = np.zeros(n, dtype=bool)              # on a free list (a maximal free cell)
        self._taken = np.zeros(n, dtype=bool)             # allocated or reserved by a caller
        self._free_kids = np.zeros(n, dtype=np.int64)     # children on a free list
        self._n_kids = np.diff(forest.child_ptr)
        self._heaps: dict[tuple[int, int], list[int]] = {}
        self._parent = forest.parent.tolist()
        self._level = forest.level.tolist()
        self._type = forest.gpu_type.tolist()
        for c in (forest.roots().tolist() if free is None else [int(x) for x in free]):
            if self._free[c]:
                raise ValidationError(f"`free` lists cell {c} twice.")
            self._push(c)

    # ---------------------------------------------------------------- free lists
    def _push(self, c: int) -> None:
        self._free[c] = True
        heapq.heappush(self._heaps.setdefault((self._type[c], self._level[c]), []), c)
        p = self._parent[c]
        if p >= 0:
            self._free_kids[p] += 1

    def _drop(self, c: int) -> None:
        self._free[c] = False            # its heap entry is skipped when popped (lazy deletion)
        p = self._parent[c]
        if p >= 0:
            self._free_kids[p] -= 1

    def _pop(self, gpu_type: int, level: int) -> int:
        heap = self._heaps.get((gpu_type, level))
        while heap:
            c = heap[0]
            if self._free[c]:
                heapq.heappop(heap)
                self._drop(c)
                return c
            heapq.heappop(heap)
        return -1

    def _split(self, c: int, target: int) -> None:
        """Split free-list-less cell ``c`` down to its descendant ``target`` (siblings freed)."""
        f = self.forest
        path = [target]
        while path[-1] != c:
            path.append(self._parent[path[-1]])
        for upper, lower in zip(path[::-1][:-1], path[::-1][1:]):
            for k in f.children(upper).tolist():
                if k != lower:
                    self._push(k)

    # ---------------------------------------------------------------- operations
    def allocate(self, gpu_type: int, level: int) -> int:
        """Take a free cell of ``gpu_type`` at ``level`` (splitting a higher one); -1 if none."""
        n_l = self.forest.sizes.shape[1]
        for up in range(level, n_l):
            c = self._pop(gpu_type, up)
            if c < 0:
                continue
            target = c
            while self._level[target] > level:
                target = int(self.forest.children(target)[0])
            self._split(c, target)
            self._taken[target] = True
            return target
        return -1

    def reserve(self, cell: int) -> bool:
        """Take ``cell`` itself if it is free (inside a free cell); False otherwise."""
        a = cell
        while a >= 0 and not self._free[a]:
            if self._taken[a]:
                return False
            a = self._parent[a]
        if a < 0:
            return False
        self._drop(a)
        self._split(a, cell)
        self._taken[cell] = True
        return True

    def release(self, cell: int) -> None:
        """Give back ``cell`` (from :meth:`allocate` or :meth:`reserve`) and merge buddies."""
        c = check_int(cell, "cell", low=0, high=self.forest.n_cells - 1)
        if not self._taken[c]:
            raise ValidationError(f"`cell` {c} is not allocated; only allocated cells can be released.")
        self._taken[c] = False
        while True:
            p = self._parent[c]
            if p >= 0 and self._free_kids[p] == self._n_kids[p] - 1:
                for k in self.forest.children(p).tolist():
                    if k != c:
                        self._drop(k)
                c = p
                continue
            self._push(c)
            return

    # ---------------------------------------------------------------- queries
    def is_free(self, cell: int) -> bool:
        """Whether ``cell`` lies inside a free cell (could be reserved now)."""
        a = cell
        while a >= 0:
            if self._free[a]:
                return True
            if self._taken[a]:
                return False
            a = self._parent[a]
        return False

    def free_cells(self) -> np.ndarray:
        """The maximal free cells (ascending ids)."""
        return np.flatnonzero(self._free)

    def taken_cells(self) -> np.ndarray:
        """The cells allocated or reserved (ascending ids)."""
        return np.flatnonzero(self._taken)

    def free_counts(self, gpu_type: int) -> np.ndarray:
        r"""Per level, the free cells of ``gpu_type`` *available* there: a free cell of level
        :math:`l' \ge l` counts :math:`S(l') / S(l)` times (it can be split)."""
        f = self.forest
        sizes = f.sizes[gpu_type]
        out = np.zeros(sizes.shape[0], dtype=np.int64)
        cells = np.flatnonzero(self._free & (f.gpu_type == gpu_type))
        gpus = np.bincount(f.level[cells], weights=(f.leaf_hi - f.leaf_lo)[cells], minlength=sizes.shape[0])
        for li in range(sizes.shape[0]):
            if sizes[li] == 0:
                continue
            # cells of level >= li, each worth (its GPUs / S(li)) cells of level li
            out[li] = int(sum(int(gpus[u]) // int(sizes[li]) for u in range(li, sizes.shape[0]) if sizes[u]))
        return out


def chain_fits(sizes: np.ndarray, cells: Sequence[int], items: Sequence[int]) -> bool:
    r"""Whether requests for cells at levels ``items`` fit into free cells at levels ``cells``
    of one type whose cell sizes are ``sizes`` (a divisible chain, 0 past the top level; a
    request is for the GPUs of a cell of its level, so levels of equal size are one).

    Highest request first, each into the free cell of the lowest level that holds it,
    splitting it (a level-:math:`l'` cell gives :math:`S(l') / S(l' - 1)` cells of level
    :math:`l' - 1`): buddy allocation on counts. With sizes in a divisible chain this
    first-fit-decreasing order packs every multiset that can be packed at all (Coffman,
    Garey and Johnson, "Bin packing with divisible item sizes", J. Complexity 1987), so the
    answer is exact and monotone: a subset of requests that fit also fits.

    >>> chain_fits(np.array([1, 2, 4]), [2], [1, 1])     # one 4-GPU cell holds two pairs
    True
    >>> chain_fits(np.array([1, 2, 4]), [1, 1], [2])     # two separate pairs do not hold a 4-GPU request
    False
    """
    if isinstance(sizes, (str, bytes, dict)):
        raise ValidationError(f"`sizes` must be the cell sizes of one type per level; got {type(sizes).__name__}.")
    n_l = int(np.count_nonzero(sizes))
    free = np.zeros(n_l, dtype=np.int64)
    for c in cells:
        free[int(c)] += 1
    # a request is for GPUs: one at a level whose cells are as large as the level below's
    # (one child each) is a request at the lowest level of that size
    low = np.searchsorted(np.asarray(sizes[:n_l]), np.asarray(sizes[:n_l]), side="left")
    for lev in sorted((int(low[i]) if int(i) < n_l else int(i) for i in items), reverse=True):
        if lev >= n_l:
            return False
        up = lev
        while up < n_l and free[up] == 0:
            up += 1
        if up == n_l:
            return False
        free[up] -= 1
        for x in range(up - 1, lev - 1, -1):
            free[x] += int(sizes[x + 1] // sizes[x]) - 1
    return True
