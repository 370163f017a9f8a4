"""The package's module-level import graph has no cycle (a cycle once ran through ``hub.export``,
``hub.reveal`` and ``hub.load``).

Edges come from ``import rap_benchmark...`` and ``from rap_benchmark... import ...`` statements
executed at import time: module level, including inside ``if``/``try`` blocks. Imports inside
functions (the deferred heavy imports the CLI style asks for) and under ``if TYPE_CHECKING:`` run
later or never, so they cannot deadlock a module's initialisation and are excluded. A module
does not get an implicit edge to its parent package's ``__init__``: re-exporting submodules from
an ``__init__`` is how packages name their API.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "rap_benchmark"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(body: list[ast.stmt]):
    """Import statements that run when the module is imported (not in functions/classes' methods)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node):
                yield from _runtime_imports(node.body)
            yield from _runtime_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _runtime_imports(block)
        elif isinstance(node, ast.With):
            yield from _runtime_imports(node.body)
        elif isinstance(node, ast.ClassDef):
            yield from _runtime_imports(node.body)


def import_graph() -> nx.DiGraph:
    modules = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative import
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    graph.add_edge(name, target)
    return graph


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert graph.number_of_nodes() > 50
    assert graph.has_edge("rap_benchmark.hub.reveal", "rap_benchmark.hub.load")  # the parser finds real edges


def test_module_level_imports_have_no_cycle() -> None:
    cycles = sorted(sorted(c) for c in nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_a_cycle_would_be_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector is not vacuous: a two-module cycle in a scratch package is reported."""
    pkg = tmp_path / "rap_benchmark"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from rap_benchmark.sub.b import x\n")
    (pkg / "sub" / "b.py").write_text("from . import a\nx = 1\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", pkg)
    assert list(nx.simple_cycles(import_graph())) != []


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
