"""Every entry point's third-party imports are installed by the base install plus the extras that
claim it (``make demo`` once crashed at its report step on a base install: ``audit/parallel.py``
imports scikit-learn, which only the ``[test]`` extra installed; the Inspect ``citecast`` task
imported the lm-eval adapter, which ``[inspect]`` does not install).

The walk is static (AST) and follows what a command can execute, function-level imports included:
starting from an entry point's function (or module), it analyses the code of every function and
class reached and every module loaded. A name used in reached code that refers to a top-level
function or class (of the same module, or imported) is reached in turn; a loaded module's
module-level code (and that of its parent packages) always runs. A class reaches all its
methods. An import inside ``try: ... except ImportError`` is an optional one with a fallback or
a one-line message, and is not required.

Distributions come from ``pyproject.toml`` (base ``dependencies`` and ``optional-dependencies``)
and what they require in turn (read from the installed metadata when present).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rap_benchmark"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Which extras each entry point may rely on beyond the base install. A `rap` command absent here
# runs on the base install. Commands are named as typed; the function is its ``set_defaults(func=)``.
COMMAND_EXTRAS: dict[str, tuple[str, ...]] = {
    "rap run": ("llm",),  # --backend transformers (one line naming the extra without it)
    "rap diagnose": ("llm",),
    "rap citecast run": ("llm",),
    "rap harness inspect-predictions": ("inspect",),  # reads Inspect logs
    "rap citecast serve": ("redis",),  # --store redis
    "rap sft gate": ("llm",),
    "rap hub publish": ("hf",),
}
INSPECT_EXTRAS = ("inspect",)
LM_EVAL_EXTRAS = ("lm-eval",)  # the API models' light install: the tasks need no torch (README: Evaluate your model)

# Import names whose distribution has another name, for distributions not installed here.
IMPORT_TO_DIST = {
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "lm_eval": "lm-eval",
    "inspect_ai": "inspect-ai",
    "huggingface_hub": "huggingface-hub",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# -- the distributions an install provides ----------------------------------------------------------


@cache
def _requires(dist: str) -> tuple[str, ...]:
    """What an installed distribution requires unconditionally (empty when it is not installed)."""
    try:
        reqs = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return ()
    out = []
    for text in reqs:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(_norm(req.name))
    return tuple(out)


def provided(extras: Iterable[str]) -> set[str]:
    """Normalised names of the distributions ``pip install .[extras]`` installs, transitively."""
    project = PYPROJECT["project"]
    texts = list(project["dependencies"])
    for extra in extras:
        texts += project["optional-dependencies"][extra]
    todo = []
    for text in texts:
        req = Requirement(text)
        todo.append(_norm(req.name))
        for sub in req.extras:  # lm-eval[api]
            for sub_text in metadata.requires(req.name) or [] if _installed(req.name) else []:
                sub_req = Requirement(sub_text)
                if sub_req.marker is not None and sub_req.marker.evaluate({"extra": sub}):
                    todo.append(_norm(sub_req.name))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_requires(name))
    return seen


def _installed(dist: str) -> bool:
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


@cache
def _module_dists() -> dict[str, tuple[str, ...]]:
    return {k: tuple(_norm(d) for d in v) for k, v in metadata.packages_distributions().items()}


def dists_of(module: str) -> set[str]:
    """The distributions that can provide the top-level import name ``module``."""
    found = set(_module_dists().get(module, ()))
    found.add(_norm(IMPORT_TO_DIST.get(module, module)))
    return found


# -- the static walk -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThirdParty:
    """One import of a module outside the package and the standard library."""

    name: str  # top-level import name
    where: str  # module:line
    optional: bool  # reached only through code inside ``try: ... except ImportError``


@dataclass
class Module:
    name: str
    tree: ast.Module
    is_pkg: bool
    defs: dict[str, ast.AST]  # top-level functions and classes
    bindings: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # name -> (module, symbol)
    guarded: set[int] = field(default_factory=set)  # ids of nodes inside try/except ImportError


@cache
@cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _guarded(tree: ast.AST) -> set[int]:
    """Nodes whose ImportError is caught: an import there, or a call that imports, is optional."""
    ids = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        caught = set()
        for handler in node.handlers:
            types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
            caught |= {t.id for t in types if isinstance(t, ast.Name)}
        if caught & {"ImportError", "ModuleNotFoundError"}:
            ids |= {id(n) for s in node.body for n in ast.walk(s)}
    return ids


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}


_PARSED: dict[str, Module] = {}


class Walker:
    """Reachability over (module, top-level name) with the third-party imports met on the way.

    Everything reached carries whether it is optional: reached only through code whose
    ImportError is caught. A required path to something reached optionally before upgrades it.
    """

    def __init__(self, paths: dict[str, Path] | None = None) -> None:
        self.paths = paths or _modules()
        # the package's modules are parsed once per session, whichever entry point reaches them
        self.parsed: dict[str, Module] = _PARSED if paths is None else {}
        self.loaded: dict[str, bool] = {}  # module -> optional
        self.reached: dict[tuple[str, str], bool] = {}
        self.third_party: list[ThirdParty] = []
        self._todo: list[tuple[str, list[ast.AST], bool]] = []

    def module(self, name: str) -> Module:
        if name not in self.parsed:
            path = self.paths[name]
            tree = ast.parse(path.read_text(encoding="utf-8"))
            mod = Module(name, tree, path.name == "__init__.py", _definitions(tree), guarded=_guarded(tree))
            for node in self._module_scope_imports(tree.body):
                mod.bindings.update(self._bind(mod, node))
            self.parsed[name] = mod
        return self.parsed[name]

    def _bind(self, mod: Module, node: ast.Import | ast.ImportFrom) -> dict[str, tuple[str, str | None]]:
        """What an import binds: local name -> (module, symbol; None for the module itself)."""
        out: dict[str, tuple[str, str | None]] = {}
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                out[alias.asname or top] = (alias.name if alias.asname else top, None)
            return out
        base = node.module or ""
        if node.level:
            anchor = mod.name.split(".") if mod.is_pkg else mod.name.split(".")[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            out[alias.asname or alias.name] = (sub, None) if sub in self.paths else (base, alias.name)
        return out

    @staticmethod
    def _module_scope_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node
            elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                yield from Walker._module_scope_imports(
                    [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
                )

    @staticmethod
    def _upgrade(seen: dict, key: object, optional: bool) -> bool:
        """Record ``key`` as reached; True when that is news (first time, or now required)."""
        if key in seen and (not seen[key] or optional):
            return False
        seen[key] = optional
        return True

    def load(self, name: str, optional: bool = False) -> None:
        """Import module ``name`` (and its parents): its module-level code runs."""
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in self.paths and self._upgrade(self.loaded, prefix, optional):
                mod = self.module(prefix)
                scope: list[ast.AST] = [n for n in mod.tree.body if n not in mod.defs.values()]
                for node in mod.defs.values():  # decorators run at import time
                    scope += node.decorator_list  # type: ignore[attr-defined]
                self._todo.append((prefix, scope, optional))

    def reach(self, module: str, symbol: str | None, optional: bool = False) -> None:
        """Make ``module.symbol`` (or the module itself) reachable."""
        if module.split(".")[0] != PACKAGE.name:
            return
        if symbol is None or f"{module}.{symbol}" in self.paths:
            self.load(module if symbol is None else f"{module}.{symbol}", optional)
            return
        if module not in self.paths or not self._upgrade(self.reached, (module, symbol), optional):
            return
        self.load(module, optional)
        mod = self.module(module)
        if symbol in mod.defs:
            self._todo.append((module, [mod.defs[symbol]], optional))
        elif symbol in mod.bindings:  # a re-export
            self.reach(*mod.bindings[symbol], optional)

    def run(self) -> None:
        while self._todo:
            self._analyse(*self._todo.pop())

    def _analyse(self, module: str, code: list[ast.AST], optional: bool) -> None:
        mod = self.module(module)
        nodes = [n for top in code for n in ast.walk(top)]
        local: dict[str, tuple[str, str | None]] = {}
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._record(mod, node, optional or id(node) in mod.guarded)
                local.update(self._bind(mod, node))
        names = {**mod.bindings, **local}
        for node in nodes:
            opt = optional or id(node) in mod.guarded
            if isinstance(node, ast.Name):
                if node.id in local or (node.id in mod.bindings and node.id not in mod.defs):
                    self.reach(*names[node.id], opt)
                elif node.id in mod.defs:
                    self.reach(module, node.id, opt)
            elif isinstance(node, ast.Attribute):
                chain = []
                value: ast.AST = node
                while isinstance(value, ast.Attribute):
                    chain.append(value.attr)
                    value = value.value
                if isinstance(value, ast.Name) and value.id in names and names[value.id][1] is None:
                    target = names[value.id][0]
                    for attr in reversed(chain):  # pkg.sub.function: load pkg.sub, reach function
                        if f"{target}.{attr}" not in self.paths:
                            self.reach(target, attr, opt)
                            break
                        target = f"{target}.{attr}"
                        self.load(target, opt)

    def _record(self, mod: Module, node: ast.Import | ast.ImportFrom, optional: bool) -> None:
        for target, _symbol in self._bind(mod, node).values():
            top = target.split(".")[0]
            if top == PACKAGE.name:  # importing runs the module; a name it binds is reached when used
                self.load(target, optional)
            elif top not in sys.stdlib_module_names and top != "__future__":
                self.third_party.append(ThirdParty(top, f"{mod.name}:{node.lineno}", optional))
        if isinstance(node, ast.Import):  # import a.b.c loads a.b.c, whatever it binds
            for alias in node.names:
                self.reach(alias.name, None, optional)


def walk(roots: Iterable[tuple[str, str | None]], paths: dict[str, Path] | None = None) -> list[ThirdParty]:
    walker = Walker(paths)
    for module, symbol in roots:
        walker.reach(module, symbol)
    walker.run()
    return walker.third_party


def missing(imports: list[ThirdParty], extras: Iterable[str]) -> list[str]:
    """Required imports no distribution of the install provides, as 'name (module:line)'."""
    have = provided(extras)
    return sorted({f"{i.name} ({i.where})" for i in imports if not i.optional and not dists_of(i.name) & have})


# -- the entry points ------------------------------------------------------------------------------


def rap_commands() -> dict[str, tuple[str, str]]:
    """Every `rap` (sub)command and its function, read from the parser the CLI builds."""
    import argparse

    from rap_benchmark.cli import build_parser

    out: dict[str, tuple[str, str]] = {}

    def visit(parser: argparse.ArgumentParser) -> None:
        func = parser.get_default("func")
        if func is not None and getattr(func, "__name__", "<lambda>") != "<lambda>":
            out[parser.prog] = (func.__module__, func.__name__)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    visit(child)

    visit(build_parser())
    return out


def _imported_names(path: Path) -> list[tuple[str, str | None]]:
    """What an entry-point module imports is what the harness uses (tasks, task classes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module for a in n.names]


def entry_points() -> dict[str, tuple[list[tuple[str, str | None]], tuple[str, ...]]]:
    """name -> (roots, extras) for every console script command, Inspect entry point and lm-eval task module."""
    out: dict[str, tuple[list[tuple[str, str | None]], tuple[str, ...]]] = {}
    for script, target in PYPROJECT["project"]["scripts"].items():
        module, func = target.split(":")
        out[script] = ([(module, "build_parser"), (module, func)], ())
    for command, (module, func) in rap_commands().items():
        out[command] = ([("rap_benchmark.cli", "main"), (module, func)], COMMAND_EXTRAS.get(command, ()))
    for group, points in PYPROJECT["project"]["entry-points"].items():
        assert group == "inspect_ai", f"an entry point group this test does not know: {group}"
        for name, module in points.items():
            path = _modules()[module]
            out[f"inspect_ai:{name}"] = ([(module, None), *_imported_names(path)], INSPECT_EXTRAS)
    # not a `rap` command and imported by nothing in the package: python -m runs it
    out["python -m rap_benchmark.testing.scripted_server"] = (
        [("rap_benchmark.testing.scripted_server", "main")],
        ("serve",),
    )
    for path in sorted((ROOT / "eval_harness_tasks").glob("*.py")):
        out[f"lm_eval:{path.name}"] = (_imported_names(path), LM_EVAL_EXTRAS)
    return out


ENTRY_POINTS = entry_points()


def test_every_kind_of_entry_point_is_walked() -> None:
    names = set(ENTRY_POINTS)
    assert {"rap", "rap build", "rap demo", "rap report", "inspect_ai:rap_benchmark", "lm_eval:rap_tasks.py"} <= names
    assert set(COMMAND_EXTRAS) <= names, f"COMMAND_EXTRAS names unknown commands: {set(COMMAND_EXTRAS) - names}"


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_entry_point_imports_are_installed_by_its_extras(name: str) -> None:
    roots, extras = ENTRY_POINTS[name]
    gaps = missing(walk(roots), extras)
    install = f"pip install .[{','.join(extras)}]" if extras else "pip install . (base)"
    assert not gaps, f"{name}: {install} does not install what it imports: " + ", ".join(gaps)


def test_the_base_commands_need_no_extra() -> None:
    """The README's first commands run on the base install."""
    for command in ("rap build", "rap demo", "rap report", "rap score", "rap verify", "rap info"):
        assert ENTRY_POINTS[command][1] == ()


def test_no_command_imports_the_test_servers_web_stack() -> None:
    """FastAPI and uvicorn are not in the base install: no `rap` command (nor the Inspect and
    lm-eval entry points) may reach them, optionally or not."""
    for name, (roots, _extras) in ENTRY_POINTS.items():
        if name.startswith("python -m"):
            continue
        found = {i.name for i in walk(roots)} & {"fastapi", "uvicorn", "starlette"}
        assert not found, f"{name} imports {found}"


def test_the_scripted_server_without_uvicorn_names_the_extra() -> None:
    import subprocess

    code = (
        "import sys; sys.modules['uvicorn'] = None; "
        "from rap_benchmark.testing.scripted_server import main; sys.exit(main([]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "scripted_server: needs uvicorn: pip install 'rap_benchmark[serve]'\n"


def test_the_walk_follows_function_level_imports() -> None:
    """Not vacuous: scikit-learn is imported only inside functions that `rap build` reaches, and
    the walk from `rap build` finds it."""
    found = walk(ENTRY_POINTS["rap build"][0])
    assert any(i.name == "sklearn" and not i.optional for i in found)


def test_a_missing_dependency_would_be_found(tmp_path: Path) -> None:
    """A scratch package whose command reaches, through a re-export, a function-level import of
    a distribution the install lacks is reported; one reached only under ``except ImportError``
    is optional, and one in a function nothing calls is not seen."""
    pkg = tmp_path / PACKAGE.name
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .deep import fallback, helper\n")
    (pkg / "sub" / "deep.py").write_text(
        "def helper():\n    import nowhere_installed\n    return nowhere_installed\n\n"
        "def unused():\n    import torch\n\n"
        "def optional_extra():\n    import redis\n\n"
        "def fallback():\n    try:\n        optional_extra()\n    except ImportError:\n        return None\n"
    )
    (pkg / "cli.py").write_text(
        "from rap_benchmark import sub\n\ndef cmd():\n    sub.helper()\n    return sub.fallback()\n"
    )
    paths = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = path.relative_to(tmp_path).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    found = walk([(f"{PACKAGE.name}.cli", "cmd")], paths)
    assert {(i.name, i.optional) for i in found} == {("nowhere_installed", False), ("redis", True)}
    assert missing(found, ()) == [f"nowhere_installed ({PACKAGE.name}.sub.deep:2)"]
