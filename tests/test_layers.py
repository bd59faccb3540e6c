"""The layering of DESIGN.md as a test: no module imports a layer above its own, and the
module groups the Unit-contract issue untangled (the validation modules, the spatial
family, the mapper) have no import cycle — counting imports inside functions too (only
``if TYPE_CHECKING:`` blocks are exempt, they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
#: Layer rank per top-level package (DESIGN.md "Layers"): import only downwards or sideways
#: within the same package.
RANK = {"workloads": 0, "energy": 1, "sim": 1, "dataflow": 1, "arch": 2, "mapper": 3,
        "archsim": 4}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):       # TYPE_CHECKING blocks never run
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return {m for m in out if m.split(".")[0] in RANK}


def _graph() -> nx.DiGraph:
    files = [p for pkg in RANK for p in (ROOT / pkg).rglob("*.py")]
    mods = {_module_name(p): p for p in files}
    g = nx.DiGraph()
    for name, path in mods.items():
        g.add_node(name)
        for imp in _imports(path):
            # resolve "pkg.mod.attr" to the longest existing module name
            parts = imp.split(".")
            while parts and ".".join(parts) not in mods:
                parts.pop()
            if parts and ".".join(parts) != name:
                g.add_edge(name, ".".join(parts))
    return g


GRAPH = _graph()


def test_no_import_runs_upward():
    bad = [f"{a} -> {b}" for a, b in GRAPH.edges
           if RANK[b.split(".")[0]] > RANK[a.split(".")[0]]
           or (RANK[b.split(".")[0]] == RANK[a.split(".")[0]]
               and a.split(".")[0] != b.split(".")[0] and a.split(".")[0] != "dataflow"
               and b.split(".")[0] != "dataflow")]
    assert not bad, "\n".join(bad)


def test_no_import_cycle_in_validation_spatial_and_mapper():
    groups = ("archsim.validation", "arch.spatial", "arch.reference", "mapper")
    sub = GRAPH.subgraph(n for n in GRAPH if n.startswith(groups))
    cycles = list(nx.simple_cycles(sub))
    assert not cycles, cycles


def test_core_modules_name_no_family():
    """The public API, the result, the mapper and the run command reach families only
    through the Unit contract (a new family edits none of them)."""
    import arch.registry  # noqa: F401
    from arch.base import UNIT_KINDS

    families = {".".join(c.__module__.split(".")[:2]) for c in UNIT_KINDS.values()}
    core = [n for n in GRAPH if n in ("archsim.api", "archsim.result", "archsim.run_cmd",
                                      "archsim.golden") or n.startswith("mapper")]
    bad = [f"{a} -> {b}" for a in core for b in GRAPH.successors(a)
           if any(b == f or b.startswith(f + ".") for f in families)]
    assert not bad, "\n".join(bad)
