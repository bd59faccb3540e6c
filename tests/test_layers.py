"""The layering of DESIGN.md as a test, over every module of the one import root.

Every module is named as it is imported (``archsim.arch.gpu.unit`` for ``arch/gpu/unit.py``,
``archsim.cli.run`` for ``archsim/cli/run.py``). The graph holds every import that can run:
module-level and inside functions (only ``if TYPE_CHECKING:`` blocks are exempt, they never
run). No module imports a layer above its own, nothing below the command line imports it,
and the graph has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
#: Folder of each layer package of the one import root (pyproject's package-dir).
FOLDERS = {"archsim": "archsim", "archsim.arch": "arch", "archsim.dataflow": "dataflow",
           "archsim.energy": "energy", "archsim.mapper": "mapper", "archsim.sim": "sim",
           "archsim.workloads": "workloads"}
#: Layer rank (DESIGN.md "Layers"): import only downwards or sideways within a layer.
#: ``dataflow`` sits beside ``energy`` and ``sim``; the library (``archsim.*``) is above the
#: mapper and the command line (``archsim.cli``) above the library.
RANK = {"archsim.workloads": 0, "archsim.energy": 1, "archsim.sim": 1, "archsim.dataflow": 1,
        "archsim.arch": 2, "archsim.mapper": 3, "archsim": 4, "archsim.cli": 5}
#: Modules of a layer that live outside its package: ``python -m archsim`` is the command line.
LAYER_OF = {"archsim.__main__": "archsim.cli"}


def _layer(module: str) -> str:
    """The layer a module belongs to: the longest RANK key it is inside."""
    if module in LAYER_OF:
        return LAYER_OF[module]
    best = ""
    for key in RANK:
        if (module == key or module.startswith(key + ".")) and len(key) > len(best):
            best = key
    return best


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, folder in FOLDERS.items():
        for p in (ROOT / folder).rglob("*.py"):
            parts = list(p.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([pkg, *parts])] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every module an import statement of ``path`` can load (TYPE_CHECKING blocks aside).

    ``from archsim import energy`` names the submodule ``archsim.energy`` only (the package's
    ``__init__`` is a parent of everything and is not an edge); ``from archsim.x import y``
    names ``archsim.x.y`` when that is a module, else ``archsim.x``.
    """
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{a.name}" for a in node.names]
            if all(s in MODULES for s in subs):
                out.update(subs)
            else:
                out.add(node.module)
                out.update(s for s in subs if s in MODULES)
    return {m for m in out if m.split(".")[0] == "archsim"}


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for imp in _imports(path):
            parts = imp.split(".")
            while parts and ".".join(parts) not in MODULES:
                parts.pop()
            target = ".".join(parts)
            if target and target != name:
                g.add_edge(name, target)
    # imports the AST cannot see: the family registry imports every family package by name
    # (importlib over arch/'s subpackages)
    from archsim.arch.registry import family_packages

    for fam in family_packages():
        g.add_edge("archsim.arch.registry", fam)
    return g


GRAPH = _graph()


def test_every_layer_folder_is_scanned():
    for layer in ("archsim.workloads.ops", "archsim.sim.engine", "archsim.arch.gpu.unit",
                  "archsim.mapper", "archsim.api", "archsim.cli"):
        assert layer in MODULES, layer


def test_no_import_runs_upward():
    bad = [f"{a} -> {b}" for a, b in GRAPH.edges
           if RANK[_layer(b)] > RANK[_layer(a)]
           or (RANK[_layer(b)] == RANK[_layer(a)] and _layer(a) != _layer(b)
               and "archsim.dataflow" not in (_layer(a), _layer(b)))]
    assert not bad, "\n".join(sorted(bad))


def test_no_import_cycle_anywhere():
    cycles = sorted(" -> ".join(c) for c in nx.simple_cycles(GRAPH))
    assert not cycles, "\n".join(cycles[:40])


def test_core_modules_name_no_family():
    """The public API, the result, the mapper and the run command reach families only
    through the Unit contract (a new family edits none of them)."""
    import archsim.arch.registry  # noqa: F401
    from archsim.arch.base import UNIT_KINDS

    families = {".".join(c.__module__.split(".")[:3]) for c in UNIT_KINDS.values()}
    assert all(f.startswith("archsim.arch.") for f in families), families
    core = [n for n in GRAPH if n in ("archsim.api", "archsim.result", "archsim.cli.run",
                                      "archsim.golden") or n.startswith("archsim.mapper")]
    bad = [f"{a} -> {b}" for a in core for b in GRAPH.successors(a)
           if any(b == f or b.startswith(f + ".") for f in families)]
    assert not bad, "\n".join(bad)


#: Optional or slow third-party packages a function may import late.
DEFERRABLE = {"matplotlib", "dask", "distributed", "onnx", "numba"}


def _function_imports(path: Path) -> list[tuple[int, ast.Import | ast.ImportFrom]]:
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: dict[int, ast.Import | ast.ImportFrom] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in skip:
                    out[n.lineno] = n
    return sorted(out.items())


def _top_level_graph() -> tuple[nx.DiGraph, set[str]]:
    """Module-level imports only, and the modules that import a deferrable package there."""
    g = nx.DiGraph()
    heavy: set[str] = set()
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        g.add_node(name)
        for node in tree.body:
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            for m in mods:
                if m.split(".")[0] in DEFERRABLE:
                    heavy.add(name)
                parts = m.split(".")
                while parts and ".".join(parts) not in MODULES:
                    parts.pop()
                if parts and ".".join(parts) != name:
                    g.add_edge(name, ".".join(parts))
    return g, heavy


def test_function_level_imports_only_defer_slow_or_optional_packages():
    """An import inside a function stays only where it defers matplotlib, dask, onnx or a
    module that loads numba (``archsim.sim``, whose lazy package hands out the Numba core, or
    a module importing numba at its top), and says so in a ``# deferred: ...`` comment (on its line or
    just above); anything else belongs at the top of the module."""
    g, heavy = _top_level_graph()
    loads_heavy = {m for m in MODULES if any(d in heavy for d in nx.descendants(g, m) | {m})}
    bad = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        for lineno, node in _function_imports(path):
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            else:   # "from pkg import sub" imports pkg.sub when that is a module
                mods = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                        else node.module or "" for a in node.names]
            ok = all(m.split(".")[0] in DEFERRABLE or _resolve(m) in loads_heavy
                     or _resolve(m).startswith("archsim.sim") for m in mods)
            above = " ".join(lines[max(0, lineno - 4):lineno])
            if not ok or "deferred" not in above:
                bad.append(f"{path.relative_to(ROOT)}:{lineno}: {ast.unparse(node)}")
    assert not bad, "\n".join(bad)


def _resolve(module: str) -> str:
    parts = module.split(".")
    while parts and ".".join(parts) not in MODULES:
        parts.pop()
    return ".".join(parts)
