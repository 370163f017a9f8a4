"""The package's imports follow its floors (docs/ARCHITECTURE.md, "Floors") and hold no cycle.

Every ``import`` statement under ``rap_benchmark/`` is read with :mod:`ast`: at module level,
inside functions and methods, and under ``if TYPE_CHECKING:`` alike. A deferred import still
ties the importer to what it imports (it deadlocks or fails the day it is hoisted), so none is
excluded. Three rules:

* no cycle between modules (an import of ``a.b.c`` also runs the ``__init__`` of ``a.b`` when
  the importer lives outside ``a.b``, so that edge is counted too);
* no cycle between packages (a module's package is its first folder under ``rap_benchmark/``;
  ``__init__.py`` and ``api.py`` at the root are the package ``api``, ``__main__.py`` is
  ``__main__``);
* a package imports only its own modules and packages on a lower floor of :data:`FLOORS`;
  packages that share a floor do not import each other.

:data:`FLOORS` is the table in docs/ARCHITECTURE.md; a test keeps the two the same.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rap_benchmark"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"

#: Bottom to top. A package may import from the floors below its own, never from its own floor's
#: other packages or from above.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("llmclient",),
    ("pipeline",),
    ("audit",),
    ("bm25",),
    ("tools",),
    ("citecast",),
    ("evaluation",),
    ("agents",),
    ("hub",),
    ("integrations", "testing"),
    ("api",),
    ("cli",),
    ("__main__",),
)
FLOOR_OF = {package: n for n, packages in enumerate(FLOORS, 1) for package in packages}


@dataclass(frozen=True)
class Import:
    """One imported module: who imports it, where, and how (module, function or type-checking)."""

    importer: str
    path: Path
    line: int
    target: str
    kind: str

    def where(self) -> str:
        return f"{self.path.relative_to(PACKAGE.parent)}:{self.line} ({self.kind}) imports {self.target}"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "api":
        return "api"
    if parts[1] == "__main__":
        return "__main__"
    return parts[1]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(node: ast.AST, kind: str = "module"):
    """Every import statement under ``node`` with how it runs: at import (module), when a function
    is called (function) or never at run time (type-checking)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, kind
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _statements(child, "type-checking" if kind == "type-checking" else "function")
        elif isinstance(child, ast.If) and _is_type_checking(child):
            for stmt in child.body:
                yield from _statements(ast.Module(body=[stmt], type_ignores=[]), "type-checking")
            for stmt in child.orelse:
                yield from _statements(ast.Module(body=[stmt], type_ignores=[]), kind)
        else:
            yield from _statements(child, kind)


def read_imports(package: Path | None = None) -> tuple[set[str], list[Import]]:
    """Every module of the package and every import of one of them by another."""
    package = package or PACKAGE
    modules = {module_name(p): p for p in sorted(package.rglob("*.py"))}
    found: list[Import] = []
    for name, path in modules.items():
        is_init = path.name == "__init__.py"
        for node, kind in _statements(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative import
                    anchor = name.split(".") if is_init else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # ``import a.b.name`` of a non-module name
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append(Import(name, path, node.lineno, target, kind))
    return set(modules), list(dict.fromkeys(found))  # one entry per (statement, module)


def module_graph(modules: set[str], imports: list[Import]) -> nx.DiGraph:
    """Module -> module, each edge carrying the first import statement that makes it."""
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for imp in imports:
        # importing a.b.c runs a.b's __init__ too, unless the importer is already inside a.b
        parts = imp.target.split(".")
        for n in range(2, len(parts) + 1):
            runs = ".".join(parts[:n])
            inside = imp.importer == runs or imp.importer.startswith(runs + ".")
            if runs in modules and runs != imp.importer and (runs == imp.target or not inside):
                if not graph.has_edge(imp.importer, runs):
                    graph.add_edge(imp.importer, runs, imp=imp)
    return graph


def package_graph(imports: list[Import]) -> nx.DiGraph:
    graph = nx.DiGraph()
    for imp in imports:
        a, b = package_of(imp.importer), package_of(imp.target)
        if a != b and not graph.has_edge(a, b):
            graph.add_edge(a, b, imp=imp)
    return graph


def describe_cycle(graph: nx.DiGraph, cycle: list[str]) -> str:
    steps = zip(cycle, [*cycle[1:], cycle[0]], strict=True)
    return "\n".join(f"    {graph.edges[a, b]['imp'].where()}" for a, b in steps)


def cycles(graph: nx.DiGraph) -> list[str]:
    return [" -> ".join(c) + ":\n" + describe_cycle(graph, c) for c in sorted(nx.simple_cycles(graph), key=sorted)]


def against_floors(imports: list[Import], floor_of: dict[str, int] | None = None) -> list[str]:
    floor_of = floor_of or FLOOR_OF
    problems = []
    for imp in imports:
        a, b = package_of(imp.importer), package_of(imp.target)
        if a == b:
            continue
        if a not in floor_of or b not in floor_of:
            problems.append(f"{imp.where()}: package {a if a not in floor_of else b!r} has no floor in FLOORS")
        elif floor_of[b] >= floor_of[a]:
            side = "the same floor as" if floor_of[b] == floor_of[a] else "a floor above"
            problems.append(f"{imp.where()}: {b} ({floor_of[b]}) is on {side} {a} ({floor_of[a]})")
    return problems


@pytest.fixture(scope="module")
def imports() -> tuple[set[str], list[Import]]:
    return read_imports()


def test_the_reader_sees_every_kind_of_import(imports: tuple[set[str], list[Import]]) -> None:
    modules, found = imports
    assert len(modules) > 100
    seen = {(i.importer, i.target, i.kind) for i in found}
    assert ("rap_benchmark.hub.reveal", "rap_benchmark.hub.load", "module") in seen
    # inside a function: the Redis store is imported only when a redis:// URL is opened
    assert ("rap_benchmark.citecast.stores", "rap_benchmark.citecast.redis_sessions", "function") in seen
    assert any(kind == "type-checking" for *_, kind in seen)


def test_no_module_imports_another_in_a_cycle(imports: tuple[set[str], list[Import]]) -> None:
    found = cycles(module_graph(*imports))
    assert not found, "import cycles between modules:\n" + "\n".join(found)


def test_no_package_imports_another_in_a_cycle(imports: tuple[set[str], list[Import]]) -> None:
    found = cycles(package_graph(imports[1]))
    assert not found, "import cycles between packages:\n" + "\n".join(found)


def test_every_import_goes_down_the_floors(imports: tuple[set[str], list[Import]]) -> None:
    problems = against_floors(imports[1])
    assert not problems, "imports against the floors (docs/ARCHITECTURE.md):\n" + "\n".join(problems)


def test_every_package_has_a_floor(imports: tuple[set[str], list[Import]]) -> None:
    packages = {package_of(m) for m in imports[0]}
    assert packages == set(FLOOR_OF), f"without a floor: {packages - set(FLOOR_OF)}; gone: {set(FLOOR_OF) - packages}"


def test_architecture_md_draws_the_same_floors() -> None:
    rows = re.findall(r"^\|\s*(\d+)\s*\|([^|]+)\|", ARCHITECTURE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    drawn = tuple(tuple(re.findall(r"`([\w_]+)`", packages)) for _, packages in sorted(rows, key=lambda r: int(r[0])))
    assert [int(n) for n, _ in rows] == list(range(1, len(rows) + 1))
    assert drawn == FLOORS


def _scratch(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "rap_benchmark"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _scratch(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": "from rap_benchmark.core.b import x\n",
            "core/b.py": "x = 1\n\ndef f():\n    from . import a\n    return a\n",
        },
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", pkg)
    found = cycles(module_graph(*read_imports(pkg)))
    assert len(found) == 1
    assert "rap_benchmark/core/b.py:4 (function) imports rap_benchmark.core.a" in found[0]


def test_an_upward_type_checking_import_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _scratch(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rap_benchmark.agents.b import B\n",
            "agents/__init__.py": "",
            "agents/b.py": "from rap_benchmark.core import a\nclass B: ...\n",
        },
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", pkg)
    _, found = read_imports(pkg)
    problems = against_floors(found)
    assert problems == [
        "rap_benchmark/core/a.py:3 (type-checking) imports rap_benchmark.agents.b: agents (9) is on a floor above core (1)"
    ]
    assert cycles(package_graph(found))  # core -> agents -> core


def test_siblings_on_one_floor_do_not_import_each_other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _scratch(
        tmp_path,
        {"testing/__init__.py": "from rap_benchmark.integrations import source\n", "integrations/source.py": ""},
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", pkg)
    (problem,) = against_floors(read_imports(pkg)[1])
    assert "is on the same floor as testing" in problem


def test_scoring_helpers_stay_private() -> None:
    """Outside ``evaluation/scoring`` code imports the package's named API, never its modules
    (its ``__init__`` once re-exported 52 helpers; now it names what outside callers use)."""
    inside = PACKAGE / "evaluation" / "scoring"
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if inside in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rap_benchmark.evaluation.scoring."):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.module}")
    assert not offenders, "\n".join(offenders)


def _defined_names(path: Path) -> set[str] | None:
    """The names a module defines at top level (or None when a module ``__getattr__`` may define
    any name)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == "__getattr__" and node in tree.body:
                return None
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def unresolved_imports(package: Path | None = None) -> list[str]:
    """Imports of the package's own modules that name a module or a name that does not exist: a
    deferred or type-checking import is never run by a plain ``import``, so a move can leave one
    dangling."""
    package = package or PACKAGE
    files = {module_name(p): p for p in sorted(package.rglob("*.py"))}
    root = package.name
    problems = []
    for name, path in files.items():
        is_init = path.name == "__init__.py"
        for node, kind in _statements(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            where = f"{path.relative_to(package.parent)}:{node.lineno} ({kind})"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == root and alias.name not in files:
                        problems.append(f"{where}: no module {alias.name}")
                continue
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_init else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != root:
                continue
            if base not in files:
                problems.append(f"{where}: no module {base}")
                continue
            defined = _defined_names(files[base])
            for alias in node.names:
                if alias.name == "*" or f"{base}.{alias.name}" in files or defined is None:
                    continue
                if alias.name not in defined:
                    problems.append(f"{where}: {base} defines no {alias.name}")
    return problems


def test_every_import_of_the_package_names_what_exists() -> None:
    problems = unresolved_imports()
    assert not problems, "imports of modules or names that do not exist:\n" + "\n".join(problems)


def test_a_dangling_type_checking_import_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = _scratch(
        tmp_path,
        {
            "core/__init__.py": "",
            "core/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rap_benchmark.core.gone import X\n"
            "def f():\n    from rap_benchmark.core.b import missing, there\n",
            "core/b.py": "there = 1\n",
        },
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", pkg)
    assert unresolved_imports(pkg) == [
        "rap_benchmark/core/a.py:3 (type-checking): no module rap_benchmark.core.gone",
        "rap_benchmark/core/a.py:5 (function): rap_benchmark.core.b defines no missing",
    ]
