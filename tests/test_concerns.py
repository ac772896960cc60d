"""The package's layout: no import circles among dbsweep's modules, and each concern's keys read only in
the concern's own module or package (as test_workloads.py checks for tool and family names)."""
from __future__ import annotations

import ast
from pathlib import Path

WORKFLOW = Path(__file__).resolve().parents[1] / "workflow"
PACKAGE = WORKFLOW / "dbsweep"


def _modules() -> dict[str, Path]:
    """Each module of the package by its dotted name (a package by its __init__.py)."""
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(WORKFLOW).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which of the package's modules each one imports: at module level and inside functions alike (an import
    in a function is a circle deferred, not broken), `from a import b` as a.b where b is a module. A parent
    package that Python runs first is not counted (importing dbsweep.engines.mariadb is not an edge to
    dbsweep.engines unless the module names it), nor importlib's look-ups by name (the registries')."""
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                          for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def test_circles_are_found():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_function_level_imports_count():
    graph = imports(_modules())
    assert "dbsweep.run" in graph["dbsweep.calibration"]  # `from dbsweep.run import repetition` in a function


def test_no_import_circles_among_the_package_modules():
    assert circles(imports(_modules())) == []
