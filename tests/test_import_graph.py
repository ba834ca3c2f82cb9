"""The import graph of ``src/hetsched`` follows the declared layering and has no circle.

The graph is built from the source with :mod:`ast`, not by importing anything: one node per
module (a package is its ``__init__``), one edge per project import wherever it stands —
module level, inside a function, inside ``if``/``try`` — in both spellings
(``from .x import y`` / ``from hetsched.x import y`` and ``import hetsched.x``), plus the
imports a module makes by name at run time:

* a string constant ``"hetsched.a.b"`` or ``"hetsched.a.b:Name"`` passed around for
  ``importlib.import_module`` (the form a lazy registry uses);
* a module that calls ``pkgutil.iter_modules`` imports every module of its own package
  (policy discovery in ``hetsched.formulations``).

``from .pkg import name`` is an edge to the submodule ``pkg.name`` when that is a module
and to ``pkg`` (its ``__init__``) otherwise. Imports under ``if TYPE_CHECKING:`` would not
run; there are none today and they are counted like any other (stricter).

Package ``__init__`` edges. Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``
first, so an import of ``a.b.c`` from a module outside package ``a.b`` is also an edge to
``a.b`` (and, from outside ``a``, to ``a``). A module inside a package has no implicit edge
to that package's own ``__init__``: Python ran it before the module, and it is the import
that led here, not one this module makes (with that edge, any package whose ``__init__``
re-exports its submodules would be a "circle").

Two rules are checked on this graph (issue 24):

* **Layering** (:data:`LAYERS`): each module belongs to a unit, the top-level package or
  module under ``hetsched`` (``inputs``, ``formulations``, ``api``, ``errors``, ...). An import
  may only go to a unit of the same or a lower rank; units of one rank must not import each
  other in a circle. The root ``hetsched/__init__`` is the public facade above everything:
  its own imports are not checked, and an import *of* it from inside the package is an edge
  up to the top.
* **No circle** among modules, with the ``__init__`` edges above counted.

Each failure lists every offending edge by module names.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "hetsched"
_STRING_IMPORT = re.compile(r"^(hetsched(?:\.[A-Za-z_][A-Za-z0-9_]*)+)(?::[A-Za-z_][A-Za-z0-9_]*)?$")

#: The declared order, low to high (docs/architecture.md; issue 24). A tuple is one rank:
#: its units may import each other (without a circle); a unit may import any unit of a lower
#: rank. Layer 2 (``solvers < formulations < result < api < policies``), layer 5
#: (``schedulers < online < sim``) and layer 6 (``reproduce < cli < __main__``) are ordered
#: inside, so each of their units is a rank of its own.
LAYERS: list[tuple[str, ...]] = [
    ("errors", "validation", "executors"),  # 0
    ("inputs",),  # 1 (inputs.traces, the throughput tables, the workload container)
    ("solvers",), ("formulations",), ("result",), ("api",), ("policies",),  # 2
    ("mechanism", "placement", "adaptive"),  # 3 (adaptive: goodput model, configuration search)
    ("rounds",),  # 4: the round engine, below every driver
    ("hived",),  # HiveD's cells, tenants and schedulers (round schedulers; below the drivers)
    ("schedulers",), ("online",), ("sim",), ("slurm",),  # 5 (slurm: the online scheduler driving Slurm)
    ("reproduce",), ("cli",), ("__main__",),  # 6
]


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of the package."""
    out = {}
    for path in sorted((src / ROOT).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is a project module."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _with_package_inits(module: str, targets: set[str], modules: dict[str, Path]) -> set[str]:
    """``targets`` plus, for each, the ``__init__`` of every enclosing package that ``module``
    is not inside (importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``)."""
    out = set(targets)
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts)):
            package = ".".join(parts[:i])
            if package in modules and not _inside(module, package):
                out.add(package)
    return out


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that ``module`` imports (see the module docstring for the rules)."""
    with warnings.catch_warnings():  # a module's own escape-sequence warnings are not this test's business
        warnings.simplefilter("ignore")
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _package_of(module, path)
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == ROOT or alias.name.startswith(ROOT + "."):
                    target = _known(alias.name, modules)
                    if target is not None:
                        out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
                if not (base == ROOT or base.startswith(ROOT + ".")):
                    continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                target = sub if sub in modules else _known(base, modules)
                if target is not None:
                    out.add(target)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _STRING_IMPORT.match(node.value)
            if m and m.group(1) in modules:
                out.add(m.group(1))
        elif (isinstance(node, ast.Attribute) and node.attr == "iter_modules"
              and isinstance(node.value, ast.Name) and node.value.id == "pkgutil"):
            out.update(m for m in modules if m.rsplit(".", 1)[0] == package and m != package)
    out = _with_package_inits(module, out, modules)
    out.discard(module)
    return out


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the project modules it imports (package ``__init__`` edges included)."""
    modules = module_files(src)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first repeated at the end), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if color[start] != WHITE:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        color[start] = GREY
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = BLACK
                stack.pop()
                path.pop()
                continue
            if color.get(nxt, BLACK) == GREY:
                return path[path.index(nxt):] + [nxt]
            if color.get(nxt) == WHITE:
                color[nxt] = GREY
                path.append(nxt)
                stack.append((nxt, iter(sorted(graph[nxt]))))
    return None


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one node (each sorted),
    i.e. every set of nodes that reach each other; empty when the graph is acyclic."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


# ----------------------------------------------------------------------------- the layering


def unit_of(module: str) -> str | None:
    """The top-level unit of ``module`` (``hetsched.sim.loop`` -> ``sim``); None for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def rank_of(layers: list[tuple[str, ...]] = LAYERS) -> dict[str, int]:
    """Unit -> its rank in ``layers`` (the index of its tuple)."""
    return {unit: r for r, units in enumerate(layers) for unit in units}


def unit_edges(graph: dict[str, set[str]]) -> dict[tuple[str | None, str | None], list[tuple[str, str]]]:
    """``(unit, unit) -> the module edges that make it``, for imports between different units;
    the root facade's own imports are left out (a unit of None is the root as a target)."""
    out: dict[tuple[str | None, str | None], list[tuple[str, str]]] = defaultdict(list)
    for src_mod, targets in graph.items():
        a = unit_of(src_mod)
        if a is None:
            continue
        for dst in targets:
            b = unit_of(dst)
            if a != b:
                out[(a, b)].append((src_mod, dst))
    return {k: sorted(v) for k, v in sorted(out.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1])))}


def layering_violations(graph: dict[str, set[str]], layers: list[tuple[str, ...]] = LAYERS) -> list[str]:
    """Every module edge that breaks the layering, one line each (empty when none):

    * ``unknown``: a unit that ``layers`` does not place (add it there, at its stage);
    * ``up``: an import of a unit of a higher rank, or of the root facade;
    * ``circle``: an edge of a circle among units of one rank.
    """
    rank = rank_of(layers)
    top = len(layers)
    lines: list[str] = []
    same_rank: dict[str, set[str]] = defaultdict(set)
    edges = unit_edges(graph)
    for (a, b), mods in edges.items():
        for unit in (a, b):
            if unit is not None and unit not in rank:
                lines.extend(f"unknown unit {unit!r}: {s} -> {d}" for s, d in mods)
        ra, rb = rank.get(a, top), (top if b is None else rank.get(b, top))
        if a not in rank or (b is not None and b not in rank):
            continue
        if rb > ra:
            what = "the root facade" if b is None else f"{b} (rank {rb})"
            lines.extend(f"up: {s} -> {d}  [{a} (rank {ra}) imports {what}]" for s, d in mods)
        elif rb == ra:
            same_rank[a].add(b)
    for comp in circles(dict(same_rank)):
        for a in comp:
            for b in sorted(same_rank[a] & set(comp)):
                lines.extend(f"circle: {s} -> {d}  [units {comp} of one rank import each other]"
                             for s, d in edges[(a, b)])
    return lines


def cycle_report(graph: dict[str, set[str]]) -> list[str]:
    """One block per circle of modules: its modules, one cycle through them, and every edge
    inside it (empty when the graph is acyclic)."""
    lines: list[str] = []
    for comp in circles(graph):
        members = set(comp)
        sub = {m: graph[m] & members for m in comp}
        lines.append(f"circle of {len(comp)} modules: " + " -> ".join(find_cycle(sub) or []))
        lines.extend(f"    {m} -> {t}" for m in comp for t in sorted(sub[m]))
    return lines


# ----------------------------------------------------------------------------- the checker


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / ROOT / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.mark.parametrize("files, cycle", [
    # module level, relative
    ({"__init__.py": "", "a.py": "from .b import f\n", "b.py": "from .a import g\n"},
     ["hetsched.a", "hetsched.b", "hetsched.a"]),
    # function-local and absolute (`import hetsched.x`)
    ({"__init__.py": "", "a.py": "def f():\n    import hetsched.b\n", "b.py": "from hetsched import a\n"},
     ["hetsched.a", "hetsched.b", "hetsched.a"]),
    # a string import (lazy registry) closes the loop
    ({"__init__.py": "", "p/__init__.py": "", "p/reg.py": "LAZY = {'x': 'hetsched.q.back:Cls'}\n",
      "q/__init__.py": "", "q/back.py": "from ..p.reg import LAZY\n"},
     ["hetsched.p.reg", "hetsched.q.back", "hetsched.p.reg"]),
    # discovery with pkgutil imports every sibling; a sibling importing the package closes it
    ({"__init__.py": "", "f/__init__.py": "import pkgutil\nfor m in pkgutil.iter_modules(__path__):\n    pass\n",
      "f/x.py": "from . import helper_name\n"},
     ["hetsched.f", "hetsched.f.x", "hetsched.f"]),
    # a circle that exists only through a package __init__: p.a imports q.b, which runs
    # q/__init__, which imports q.c, which imports p.a back (no module imports p.a's importer)
    ({"__init__.py": "", "p/__init__.py": "", "p/a.py": "def f():\n    from ..q.b import g\n",
      "q/__init__.py": "from .c import h\n", "q/b.py": "", "q/c.py": "from hetsched.p.a import f\n"},
     ["hetsched.p.a", "hetsched.q", "hetsched.q.c", "hetsched.p.a"]),
])
def test_checker_finds_planted_cycles(tmp_path, files, cycle):
    graph = import_graph(_write(tmp_path, files))
    assert find_cycle(graph) == cycle
    assert any(set(cycle) <= set(comp) for comp in circles(graph))
    assert cycle_report(graph)[0].startswith("circle of ")


def test_checker_counts_package_inits_from_outside_only(tmp_path):
    files = {"__init__.py": "", "a/__init__.py": "", "a/b/__init__.py": "", "a/b/c.py": "from ..x import y\n",
             "a/x.py": "", "m.py": "import hetsched.a.b.c\n"}
    graph = import_graph(_write(tmp_path, files))
    # from outside `a`: a/__init__ and a/b/__init__ run too
    assert graph["hetsched.m"] == {"hetsched.a", "hetsched.a.b", "hetsched.a.b.c"}
    # from inside `a` (but outside nothing else): no edge to its own packages' __init__
    assert graph["hetsched.a.b.c"] == {"hetsched.a.x"}
    assert circles(graph) == [] and find_cycle(graph) is None


def test_checker_accepts_a_dag_and_resolves_submodules(tmp_path):
    files = {"__init__.py": "from . import a, b\n", "a.py": "from . import b\nfrom .b import thing\n",
             "b.py": "import numpy\nfrom hetsched.c import d\n", "c/__init__.py": "", "c/d.py": "X = 'hetsched.nope'\n"}
    graph = import_graph(_write(tmp_path, files))
    assert graph == {"hetsched": {"hetsched.a", "hetsched.b"}, "hetsched.a": {"hetsched.b"},
                     "hetsched.b": {"hetsched.c", "hetsched.c.d"}, "hetsched.c": set(), "hetsched.c.d": set()}
    assert find_cycle(graph) is None and circles(graph) == [] and cycle_report(graph) == []


_PLANTED_LAYERS = [("low",), ("mid1", "mid2"), ("high",)]


@pytest.mark.parametrize("files, expected", [
    # a back edge hidden in a function
    ({"__init__.py": "", "low/__init__.py": "", "low/x.py": "def f():\n    from ..high.y import g\n",
      "high/__init__.py": "", "high/y.py": "from ..low import x\n"},
     ["up: hetsched.low.x -> hetsched.high  [low (rank 0) imports high (rank 2)]",
      "up: hetsched.low.x -> hetsched.high.y  [low (rank 0) imports high (rank 2)]"]),
    # a string import (lazy registry) of a higher unit
    ({"__init__.py": "", "low.py": "LAZY = 'hetsched.high:Cls'\n", "high.py": ""},
     ["up: hetsched.low -> hetsched.high  [low (rank 0) imports high (rank 2)]"]),
    # the root facade is above everything
    ({"__init__.py": "from .high import Cls\n", "low.py": "from hetsched import Cls\n", "high.py": "Cls = 1\n"},
     ["up: hetsched.low -> hetsched  [low (rank 0) imports the root facade]"]),
    # two units of one rank in a circle, through a package __init__ only
    ({"__init__.py": "", "mid1/__init__.py": "", "mid1/a.py": "from ..mid2.b import g\n",
      "mid2/__init__.py": "from .c import h\n", "mid2/b.py": "", "mid2/c.py": "import hetsched.mid1.a\n"},
     ["circle: hetsched.mid1.a -> hetsched.mid2  [units ['mid1', 'mid2'] of one rank import each other]",
      "circle: hetsched.mid1.a -> hetsched.mid2.b  [units ['mid1', 'mid2'] of one rank import each other]",
      "circle: hetsched.mid2.c -> hetsched.mid1  [units ['mid1', 'mid2'] of one rank import each other]",
      "circle: hetsched.mid2.c -> hetsched.mid1.a  [units ['mid1', 'mid2'] of one rank import each other]"]),
    # a unit the layering does not place
    ({"__init__.py": "", "low.py": "", "stray.py": "from . import low\n"},
     ["unknown unit 'stray': hetsched.stray -> hetsched.low"]),
    # downward and same-rank (acyclic) edges are fine; the root's own imports are not checked
    ({"__init__.py": "from . import high\n", "low.py": "", "mid1.py": "from . import low\n",
      "mid2.py": "from . import mid1\n", "high.py": "from . import mid2, low\n"}, []),
])
def test_layering_checker_reports_every_offending_edge(tmp_path, files, expected):
    graph = import_graph(_write(tmp_path, files))
    assert layering_violations(graph, _PLANTED_LAYERS) == expected


# ----------------------------------------------------------------------------- the package


#: The circles issue 18 names, each as a pair of modules that must not reach each other
#: both ways.
FIXED_CIRCLES = [
    ("hetsched.formulations.spaces.space", "hetsched.formulations.spaces.placement_sensitivity"),
    ("hetsched.solvers.registry", "hetsched.solvers.structured.backend"),
    ("hetsched.formulations", "hetsched.formulations.base"),
]


def _reaches(graph: dict[str, set[str]], a: str, b: str) -> bool:
    seen, todo = {a}, [a]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt == b:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_every_unit_has_a_place_in_the_layering():
    units = {unit_of(m) for m in module_files()} - {None}
    assert units == set(rank_of()), f"not placed: {sorted(units - set(rank_of()))}; gone: {sorted(set(rank_of()) - units)}"


def test_hetsched_follows_the_layering():
    graph = import_graph()
    assert len(graph) > 50 and "hetsched.solvers.registry" in graph  # the walk found the package
    bad = layering_violations(graph)
    assert not bad, f"{len(bad)} import(s) against the layering (low -> high: {LAYERS}):\n" + "\n".join(bad)


def test_hetsched_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and "hetsched.solvers.registry" in graph
    report = cycle_report(graph)
    assert not report, "import circles (package __init__ edges counted):\n" + "\n".join(report)


@pytest.mark.parametrize("a, b", FIXED_CIRCLES)
def test_named_circles_are_gone(a, b):
    graph = import_graph()
    assert not (_reaches(graph, a, b) and _reaches(graph, b, a))


def test_registry_imports_no_backend_by_name():
    """The backend registry takes registrations: it imports no backend module, by statement or string."""
    graph = import_graph()
    assert graph["hetsched.solvers.registry"] <= {"hetsched.errors", "hetsched.solvers.program", "hetsched.solvers.base"}
