r"""Tenants and their virtual clusters (HiveD, Zhao et al., OSDI 2020, §3: "virtual private
clusters" and cells), read from a mapping or a JSON file and checked against the
physical cells before anything runs.

A tenant's *virtual cluster* (VC) is, per GPU type, a number of cells per level: e.g.
``{"v100": {"server": 2, "switch": 3}}`` is two server cells and three switch cells of
V100s. Its *quota* (what a quota-based scheduler would give it) is the GPU count
:math:`Q_{v,t} = \sum_l n_{v,t,l}\, S_t(l)`.

Safety (§4). HiveD guarantees every tenant its cells at any time iff all virtual clusters
fit the physical cells *at once*: per type, the virtual cells of every tenant, taken from
the highest level down, can each be given a free physical cell of its level by buddy
allocation. Because the cell sizes of a type form a divisible chain, this highest-first
buddy allocation succeeds whenever any assignment exists, and §4 shows that the dynamic
binding of the scheduler (bind a virtual cell to a free physical cell of its level when it
is first used, release it when it empties) then never fails. :meth:`Tenants.check` runs
exactly this allocation and refuses a configuration that cannot honour every guarantee,
naming the type, the level, the tenant and the numbers.

File format (``--tenants FILE``)::

    {"tenants": [
        {"name": "a", "cells": {"v100": {"server": 2}}, "priority": "guaranteed"},
        {"name": "b", "cells": {"v100": {"switch": 3}, "k80": {"server": 1}}}
    ]}

``priority`` (default ``"guaranteed"``) is the class of the tenant's jobs unless a per-job
table says otherwise; ``"opportunistic"`` jobs run on idle cells and are preempted when an
owner claims them (§4).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..validation import (
    check_choice,
    check_int,
    check_mapping,
    check_nonempty_str,
    fail,
    read_json_file,
)
from .cells import BuddyAllocator, CellForest

__all__ = ["PRIORITIES", "Tenant", "Tenants", "read_tenants"]

log = logging.getLogger(__name__)

#: Job classes (§4): guaranteed jobs use their tenant's cells; opportunistic ones idle cells.
PRIORITIES = ("guaranteed", "opportunistic")


@dataclass(frozen=True)
class Tenant:
    """One tenant: a name, its virtual cluster and the default class of its jobs.

    Parameters
    ----------
    name : str
        Non-empty; the workload's entity label of the tenant's jobs.
    cells : Mapping[str, Mapping[str, int]]
        GPU type -> level name -> number of cells (non-negative integers).
    priority : {"guaranteed", "opportunistic"}, default "guaranteed"
    """

    name: str
    cells: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    priority: str = "guaranteed"

    def __post_init__(self) -> None:
        check_nonempty_str(self.name, "tenant.name")
        check_mapping(self.cells, f"tenant {self.name!r} cells", rule="a mapping GPU type -> {level: count}")
        clean: dict[str, dict[str, int]] = {}
        for t, per in self.cells.items():
            check_nonempty_str(t, f"tenant {self.name!r} cells GPU type")
            check_mapping(per, f"tenant {self.name!r} cells[{t!r}]", rule="a mapping level -> count")
            clean[t] = {}
            for lev, n in per.items():
                check_nonempty_str(lev, f"tenant {self.name!r} cells[{t!r}] level")
                clean[t][lev] = check_int(n, f"tenant {self.name!r} cells[{t!r}][{lev!r}]", low=0, whole_floats=True)
        object.__setattr__(self, "cells", clean)
        check_choice(self.priority, f"tenant {self.name!r} priority", PRIORITIES)


@dataclass(frozen=True, eq=False)
class Tenants:
    """The tenants of a cluster, in order (see the module docstring).

    Parameters
    ----------
    tenants : sequence of Tenant (or mappings with ``name``, ``cells``, ``priority``)
    """

    tenants: tuple[Tenant, ...]

    def __post_init__(self) -> None:
        items = self.tenants
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise fail("tenants", "a sequence of Tenant records", items, shown=type(items).__name__)
        out: list[Tenant] = []
        for i, t in enumerate(items):
            if isinstance(t, Mapping):
                extra = sorted(set(t) - {"name", "cells", "priority"})
                if extra or "name" not in t:
                    raise ValidationError(f"`tenants[{i}]` must have 'name' and optionally 'cells', 'priority'; "
                                          f"got keys {sorted(t)}.")
                t = Tenant(t["name"], t.get("cells", {}), t.get("priority", "guaranteed"))
            elif not isinstance(t, Tenant):
                raise fail(f"tenants[{i}]", "a Tenant or a mapping", t, shown=type(t).__name__)
            out.append(t)
        if not out:
            raise ValidationError("`tenants` must name at least one tenant; got none.")
        names = [t.name for t in out]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValidationError(f"`tenants` names must be unique; {dup} repeat.")
        object.__setattr__(self, "tenants", tuple(out))

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], *, argument: str = "tenants") -> Tenants:
        """Tenants from ``{"tenants": [...]}`` (the file format)."""
        check_mapping(spec, argument, rule="a mapping with key 'tenants'")
        if set(spec) != {"tenants"}:
            raise ValidationError(f"`{argument}` must have exactly the key 'tenants'; got keys {sorted(spec)}.")
        return cls(tuple(spec["tenants"]) if isinstance(spec["tenants"], list) else spec["tenants"])

    def to_dict(self) -> dict[str, Any]:
        """The file format."""
        return {"tenants": [{"name": t.name, "cells": {k: dict(v) for k, v in t.cells.items()},
                             "priority": t.priority} for t in self.tenants]}

    @property
    def names(self) -> tuple[str, ...]:
        """Tenant names, in order."""
        return tuple(t.name for t in self.tenants)

    def __len__(self) -> int:
        return len(self.tenants)

    def index(self, name: Any, *, job: Any = None) -> int:
        """Index of tenant ``name``; a job of an unknown tenant is refused (naming the job)."""
        try:
            return self.names.index(name)
        except ValueError:
            who = "" if job is None else f"job {job!r} belongs to "
            raise ValidationError(f"{who}tenant {name!r}, which does not exist (tenants: {list(self.names)}).") from None

    def virtual_cells(self, forest: CellForest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every tenant's virtual cells as ``(tenant, type, level)`` arrays, ordered by tenant,
        type, then level from the highest down (validated against ``forest``)."""
        topo = forest.topology
        rows: list[tuple[int, int, int]] = []
        for v, ten in enumerate(self.tenants):
            for tname, per in ten.cells.items():
                if tname not in topo.gpu_types:
                    raise ValidationError(f"tenant {ten.name!r} asks for cells of GPU type {tname!r}, which the "
                                          f"cluster does not have (types: {list(topo.gpu_types)}).")
                k = topo.gpu_types.index(tname)
                levs = []
                for lev, n in per.items():
                    if lev not in topo.level_names:
                        raise ValidationError(f"tenant {ten.name!r} asks for {n} {tname} cell(s) at level {lev!r}, "
                                              f"which the topology lacks (levels: {list(topo.level_names)}).")
                    li = topo.level_index(lev)
                    if n and forest.sizes[k, li] == 0:
                        have = [topo.level_names[x] for x in np.flatnonzero(forest.sizes[k])]
                        raise ValidationError(f"tenant {ten.name!r} asks for {n} {tname} cell(s) at level {lev!r}, "
                                              f"but {tname} has no cells at that level (its cell levels: {have}).")
                    levs.append((li, n))
                for li, n in sorted(levs, reverse=True):
                    rows.extend([(v, k, li)] * n)
        a = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy()

    def quotas(self, forest: CellForest) -> np.ndarray:
        """GPU quota per tenant and type, shape ``(n_tenants, n_types)``: :math:`Q_{v,t}`."""
        v, k, li = self.virtual_cells(forest)
        q = np.zeros((len(self), len(forest.topology.gpu_types)), dtype=np.int64)
        np.add.at(q, (v, k), forest.sizes[k, li])
        return q

    def check(self, forest: CellForest, *, bad_gpus: Sequence[int] = ()) -> None:
        """Refuse virtual clusters that do not fit the physical cells at once (the safety
        condition of the module docstring); ``bad_gpus`` are out of service."""
        v, k, li = self.virtual_cells(forest)
        buddy = BuddyAllocator(forest)
        for g in bad_gpus:
            buddy.reserve(int(forest.gpu_cell[int(g)]))
        topo = forest.topology
        order = np.lexsort((v, -li, k))
        for i in order.tolist():
            if buddy.allocate(int(k[i]), int(li[i])) >= 0:
                continue
            t, lev = int(k[i]), int(li[i])
            same = (k == t) & (li == lev)
            asked = {self.names[x]: int((v[same] == x).sum()) for x in np.unique(v[same]).tolist()}
            total = forest.count(t, lev) if forest.sizes[t, lev] else 0
            higher = {topo.level_names[x]: int(((k == t) & (li == x)).sum()) for x in range(lev + 1, topo.n_levels)
                      if ((k == t) & (li == x)).any()}
            raise ValidationError(
                f"the virtual clusters do not fit the physical {topo.gpu_types[t]} cells: tenant "
                f"{self.names[int(v[i])]!r} needs a cell at level {topo.level_names[lev]!r} and none is left; "
                f"tenants ask for {sum(asked.values())} cell(s) at that level ({asked}) after {higher or 'none'} "
                f"above it, and the cluster has {total} {topo.gpu_types[t]} cell(s) at that level"
                f"{f' ({len(bad_gpus)} bad GPU(s) out of service)' if len(bad_gpus) else ''}.")
        log.debug("tenants: %d virtual cells fit the physical cells", int(v.shape[0]))


def read_tenants(path: Any) -> Tenants:
    """Read tenants from a JSON file (format in the module docstring)."""
    spec = read_json_file(path, "`tenants` file")
    return Tenants.from_dict(spec, argument=f"tenants file {Path(path).name}")
