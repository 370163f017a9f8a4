"""The top-level API: eight documented verbs whose docstring examples run as written on mini."""

from __future__ import annotations

import doctest
import inspect
from pathlib import Path

import pytest

import rap_benchmark
from rap_benchmark import api

VERBS = ("build", "load", "verify", "search", "run", "validate", "score", "export")


RETURN_TYPES = ("Instance", "SearchObservation", "RunStats", "ValidationReport", "ScoreResult", "ExportResult")


def test_the_top_level_names_the_verbs_and_few_types() -> None:
    assert set(VERBS) <= set(rap_benchmark.__all__)
    types = [n for n in rap_benchmark.__all__ if n not in VERBS and n not in RETURN_TYPES]
    assert len(types) <= 12, types
    for name in rap_benchmark.__all__:
        assert getattr(rap_benchmark, name) is not None


@pytest.mark.parametrize("verb", VERBS)
def test_what_each_verb_returns_is_exported(verb: str) -> None:
    """Each verb's return annotation names only exported types (or Path / builtins), and the
    exported name is the very class the verb returns."""
    import re
    import typing

    annotation = inspect.signature(getattr(rap_benchmark, verb)).return_annotation
    names = set(re.findall(r"[A-Za-z_]\w*", str(annotation))) - {"tuple", "list", "str", "Path", "None"}
    assert names <= set(RETURN_TYPES) <= set(rap_benchmark.__all__), (verb, annotation)
    returned = eval(str(annotation), {"Path": Path, **{n: getattr(rap_benchmark, n) for n in RETURN_TYPES}})
    for name in names:
        assert getattr(rap_benchmark, name) in (returned, *typing.get_args(returned)), name
    assert returned == eval(str(annotation), vars(api) | {"Path": Path} | _heavy_types())


def _heavy_types() -> dict[str, type]:
    """The return types as the verbs' own module names them (under TYPE_CHECKING there)."""
    from rap_benchmark.agents.runner import RunStats
    from rap_benchmark.core.artifacts import Instance
    from rap_benchmark.evaluation.predictions import ValidationReport
    from rap_benchmark.hub.export import ExportResult

    return {
        "RunStats": RunStats,
        "ValidationReport": ValidationReport,
        "ExportResult": ExportResult,
        "Instance": Instance,
    }


def test_import_rap_benchmark_stays_light() -> None:
    """The lazily exported return types do not load their subpackages at import time (nor pandas:
    tests/test_cli_imports.py)."""
    import subprocess
    import sys

    code = (
        "import sys, rap_benchmark as rap;"
        "heavy = [m for m in ('rap_benchmark.agents.runner', 'rap_benchmark.evaluation.predictions',"
        " 'rap_benchmark.hub.export', 'rap_benchmark.core.artifacts') if m in sys.modules];"
        "assert not heavy, heavy;"
        "assert rap.RunStats.__name__ == 'RunStats' and 'rap_benchmark.agents.runner' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_a_docstring_example(verb: str) -> None:
    doc = inspect.getdoc(getattr(rap_benchmark, verb)) or ""
    assert ">>> import rap_benchmark as rap" in doc and f"rap.{verb}(" in doc


def test_the_docstring_examples_run_on_mini(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every example, from an empty folder: ``build`` first (it builds mini into build/mini), then
    the module's and the other verbs' examples in file order, reading what the earlier ones wrote."""
    monkeypatch.chdir(tmp_path)
    tests = {t.name.rsplit(".", 1)[-1]: t for t in doctest.DocTestFinder().find(api, "rap_benchmark.api") if t.examples}
    runner = doctest.DocTestRunner()
    first = tests.pop("build")
    order = [first, *sorted(tests.values(), key=lambda t: t.lineno or 0)]
    for test in order:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    assert {t.name.rsplit(".", 1)[-1] for t in order} >= set(VERBS)
    assert result.attempted >= 25
    assert (tmp_path / "build" / "mini" / "SHA256SUMS").is_file() and (tmp_path / "hub" / "rap" / "fields").is_dir()


def _script(name: str):
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "dataset_scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"dataset_scripts_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dataset_scripts_call_the_api(mini_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """export_hf.py and publish_hf.py go through rap_benchmark.export and hub.publish (no CLI)."""
    for name in ("export_hf", "publish_hf", "refresh_manifests"):
        source = (Path(__file__).resolve().parents[1] / "dataset_scripts" / f"{name}.py").read_text()
        assert "rap_benchmark.cli" not in source
    assert _script("export_hf").main([str(mini_dir), "--out", str(tmp_path / "hub"), "--withhold-test-targets"]) == 0
    assert (tmp_path / "hub" / "_private" / "salt.hex").is_file()
    assert _script("publish_hf").main([str(tmp_path / "hub"), "--org", "rap", "--tag", "v1", "--dry-run"]) == 0
    plan = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("plan\tcreate_repo\trap/") for line in plan) == 6


def test_the_search_verb_is_not_shadowed_by_a_subpackage() -> None:
    """The engine lives in ``rap_benchmark.bm25``, so importing its modules never rebinds
    ``rap.search`` (when the subpackage was called ``search``, ``rap.search(...)`` raised 'module
    is not callable' in the full suite but not alone)."""
    import subprocess
    import sys

    code = (
        "import rap_benchmark as rap, rap_benchmark.bm25.engine, importlib;"
        "importlib.import_module('rap_benchmark.bm25.tool');"
        "assert callable(rap.search) and rap.search is rap.api.search, rap.search"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
