"""The import graph of ralm/ has no cycle, counting every import a module can make: at the top, inside a
function and under ``if TYPE_CHECKING:``.

A cycle that only a lazy import or ``TYPE_CHECKING`` keeps from failing at import time is still two modules
that each need the other, usually a type living beside its user instead of with its concept; fix it by
moving the type, not by hiding the import. The graph is read from the source with `ast` (nothing is
imported), one edge per import of a ralm module. Importing a submodule also runs its packages'
``__init__``; those implicit edges are left out (a package re-exporting its submodules would be a cycle),
so a package counts only for the imports written in its ``__init__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralm"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name, for its ``__init__``)."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The module that defines `name` (a module, or an attribute of one): its longest known prefix."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom, module: str, modules: dict[str, Path]) -> Iterator[str]:
    """The ralm modules an import statement runs: ``import a.b`` and ``from a import b`` name the module
    a.b when there is one, else the module whose attribute b is (relative imports resolved)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if modules[module].name == "__init__.py" else module.split(".")[:-1]
            parent = package[: len(package) - node.level + 1]
            base = ".".join([*parent, base] if base else parent)
        names = [f"{base}.{alias.name}" for alias in node.names]
        names = [name if name in modules else base for name in names]
    for name in names:
        target = _owner(name, modules)
        if target is not None and target != module:
            yield target


def import_edges(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """Each module -> the ralm modules it imports, with the first line that does."""
    edges: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        out: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(node, module, modules):
                    out[target] = min(out.get(target, node.lineno), node.lineno)
        edges[module] = out
    return edges


def strongly_connected(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's groups of more than one module (each a set of modules that all reach each other)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while (top := stack.pop()) != module:
                group.append(top)
            if group:
                groups.append(sorted([module, *group]))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return groups


def a_cycle(group: list[str], edges: dict[str, dict[str, int]]) -> list[str]:
    """One cycle through `group`'s first module, as the chain of modules that import each other."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:  # breadth first: the shortest way back to `start`
        following = []
        for module in frontier:
            for target in sorted(set(edges[module]) & members):
                if target == start:
                    return paths[module] + [start]
                if target not in paths:
                    paths[target] = paths[module] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{group} is no cycle")


def describe(cycle: list[str], edges: dict[str, dict[str, int]], modules: dict[str, Path]) -> str:
    steps = [
        f"  {a} -> {b}  ({modules[a].relative_to(ROOT)}:{edges[a][b]})"
        for a, b in zip(cycle, cycle[1:], strict=False)
    ]
    return "\n".join(steps)


def test_ralm_has_no_import_cycle():
    modules = module_files()
    edges = import_edges(modules)
    groups = strongly_connected(edges)
    report = "\n".join(f"{', '.join(g)}:\n{describe(a_cycle(g, edges), edges, modules)}" for g in groups)
    assert not groups, f"import cycles in ralm/ (move the type to the module of its concept):\n{report}"


def test_the_graph_sees_every_kind_of_import(tmp_path):
    """TYPE_CHECKING and function-level imports are edges; so are relative imports; a cycle is found."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    from pkg.b import B\n")
    (package / "b.py").write_text("def f():\n    from .sub import c\n")
    (package / "sub" / "c.py").write_text("from ..a import x\nimport pkg.sub\n")
    modules = module_files(package)
    edges = import_edges(modules)
    assert {m: sorted(e) for m, e in edges.items()} == {
        "pkg": [],
        "pkg.a": ["pkg.b"],
        "pkg.b": ["pkg.sub.c"],
        "pkg.sub": [],
        "pkg.sub.c": ["pkg.a", "pkg.sub"],
    }
    (group,) = strongly_connected(edges)
    assert group == ["pkg.a", "pkg.b", "pkg.sub.c"]
    assert a_cycle(group, edges) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
